// ibemu trace show: draws the embedded run trace (doc/trace.md) as a
// ladder in the page's SVG, and writes what it drew onto <body> as
// data-* counts (data-selfcheck="ok" when drawing finished).
"use strict";
(function () {
	const NS = "http://www.w3.org/2000/svg";
	const D = JSON.parse(document.getElementById("trace-data").textContent);
	const BOUND = 2000, KEEP = 3, MAXP = 64;
	const LW = 160, LEFT = 90, TOP = 64, ROW = 16;
	const svg = document.getElementById("ladder");
	const info = document.getElementById("info");
	const shown = D.lanes.map(() => true);
	let zoom = 1, from = 0, to = Infinity, selected = null;

	function el(tag, attrs, parent) {
		const e = document.createElementNS(NS, tag);
		for (const k in attrs)
			e.setAttribute(k, attrs[k]);
		parent.appendChild(e);
		return e;
	}
	function us(ns) { return (ns / 1000).toFixed(3); }
	function laneName(l) {
		const L = D.lanes[l], P = D.procs[L[0]];
		return P[0] + "/" + P[1] + (P[2] ? " " + P[2] : "") +
			" QP " + L[1] + (L[2] ? " " + L[2] : "");
	}
	function evText(i) {
		const e = D.ev[i];
		return "t=+" + us(e[0]) + " us  ev=" + e[2] + "\n" +
			e[3].split(" ").join("\n") +
			(e[1] >= 0 ? "\nlane: " + laneName(e[1]) : "") +
			(e[4] ? "\n(error)" : "");
	}
	// Hover shows the fields (<title>), a click keeps them in the panel.
	function explain(node, text) {
		el("title", {}, node).textContent = text;
		node.addEventListener("click", function (ev) {
			if (selected)
				selected.classList.remove("sel");
			selected = node;
			node.classList.add("sel");
			info.textContent = text;
			ev.stopPropagation();
		});
	}
	// An arrow's name: its opcode without the transport, its PSN, and
	// the AETH unless it is a plain ACK.
	function packetLabel(i) {
		const f = " " + D.ev[i][3];
		const psn = / psn=(\S+)/.exec(f), aeth = / aeth=(\S+)/.exec(f);
		return opOf(i).replace(/^(RC|UC|UD|RD|XRC)_/, "") +
			(psn ? " " + psn[1] : "") +
			(aeth && aeth[1] !== "ACK" ? " " + aeth[1] : "");
	}
	function opOf(i) {
		const m = / ?op=(\S+)/.exec(" " + D.ev[i][3]);
		return m ? m[1] : "";
	}

	// The events to draw: on a lane that is ticked, in the time range.
	function visible() {
		const v = [];
		for (let i = 0; i < D.ev.length; i++) {
			const e = D.ev[i];
			if ((e[1] < 0 || shown[e[1]]) && e[0] >= from && e[0] <= to)
				v.push(i);
		}
		return v;
	}

	// Rows: events, and bands standing for a pattern of (lane, kind,
	// op) repeated, of which the first KEEP repetitions are drawn.
	function fold(v) {
		const ids = new Map(), s = v.map(function (i) {
			const k = D.ev[i][1] + " " + D.ev[i][2] + " " + opOf(i);
			if (!ids.has(k))
				ids.set(k, ids.size);
			return ids.get(k);
		});
		function same(a, b, p) {
			for (let j = 0; j < p; j++)
				if (s[a + j] !== s[b + j])
					return false;
			return true;
		}
		const rows = [];
		let folded = 0, k = 0;
		while (k < v.length) {
			let best = null;
			for (let p = 1; p <= MAXP && k + 2 * p <= v.length; p++) {
				let r = 1;
				while (k + (r + 1) * p <= v.length && same(k, k + r * p, p))
					r++;
				if (r > KEEP + 1 && (!best || r * p > best.r * best.p))
					best = { p: p, r: r };
			}
			if (!best) {
				rows.push({ ev: v[k++] });
				continue;
			}
			const keep = KEEP * best.p, n = (best.r - KEEP) * best.p;
			for (let j = 0; j < keep; j++)
				rows.push({ ev: v[k + j] });
			rows.push({ band: best.r - KEEP, p: best.p,
				evs: v.slice(k + keep, k + keep + n) });
			folded += n;
			k += best.r * best.p;
		}
		return { rows: rows, folded: folded };
	}

	function draw() {
		while (svg.firstChild)
			svg.removeChild(svg.firstChild);
		const v = visible();
		let rows = v.map(function (i) { return { ev: i }; }), folded = 0;
		let truncated = 0;
		const notes = [];
		if (v.length > BOUND) {
			const f = fold(v);
			rows = f.rows;
			folded = f.folded;
			if (folded)
				notes.push(folded + " events folded into repeated " +
					"patterns (bands)");
		}
		if (rows.length > BOUND) {
			for (const r of rows.slice(BOUND))
				truncated += r.band ? r.evs.length : 1;
			rows = rows.slice(0, BOUND);
			notes.push("the last " + truncated + " events not drawn: " +
				"narrow the time range");
		}
		const st = D.stats;
		if (st.long || st.bad || st.badfields || st.over)
			notes.push("skipped in the files: " + st.long +
				" long lines, " + st.bad + " malformed lines, " +
				st.badfields + " bad fields, " + st.over +
				" events over the limit");
		document.getElementById("note").textContent = notes.join("; ");

		// Columns: the ticked lanes, grouped by node and process.
		const col = [], cols = [];
		D.lanes.forEach(function (L, l) {
			if (shown[l]) {
				col[l] = cols.length;
				cols.push(l);
			}
		});
		const x = function (l) { return LEFT + col[l] * LW + LW / 2; };
		const step = ROW * zoom;
		const y = [], drawn = [];
		rows.forEach(function (r, n) {
			const yy = TOP + (n + 1) * step;
			if (r.band) {
				r.evs.forEach(function (i) { y[i] = yy; });
				r.y = yy;
			} else {
				y[r.ev] = yy;
				drawn[r.ev] = true;
			}
		});
		const height = TOP + (rows.length + 2) * step;
		const width = LEFT + Math.max(cols.length, 1) * LW + 240;
		svg.setAttribute("width", width);
		svg.setAttribute("height", height);
		el("rect", { x: 0, y: 0, width: width, height: height,
			fill: "#fff" }, svg);
		headers(cols, x, height);
		const counts = { lanes: cols.length, wrs: 0, arrows: 0, acks: 0,
			stubs: 0, errors: 0, events: 0, folded: folded,
			truncated: truncated };
		rows.forEach(function (r) {
			if (r.band)
				band(r, width, step);
		});
		counts.wrlist = [];
		brackets(x, y, drawn, counts);
		counts.wrlist = counts.wrlist.join(" ");
		arrows(x, y, drawn, counts);
		rows.forEach(function (r) {
			if (!r.band)
				mark(r.ev, x, y[r.ev], counts);
		});
		for (const k in counts)
			document.body.setAttribute("data-" + k, counts[k]);
		document.body.setAttribute("data-selfcheck", "ok");
	}

	function headers(cols, x, height) {
		let n = 0;
		while (n < cols.length) {
			const L = D.lanes[cols[n]], P = D.procs[L[0]];
			let m = n, k = n;
			while (m < cols.length && D.procs[D.lanes[cols[m]][0]][0] === P[0])
				m++;
			const nx = LEFT + n * LW;
			explain(el("rect", { class: "node", x: nx + 1, y: 2,
				width: (m - n) * LW - 2, height: 18 }, svg),
			"node " + P[0]);
			el("text", { x: nx + 6, y: 15 }, svg).textContent = "node " + P[0];
			while (k < m) {
				const p = D.lanes[cols[k]][0];
				let j = k;
				while (j < m && D.lanes[cols[j]][0] === p)
					j++;
				const px = LEFT + k * LW, Q = D.procs[p];
				explain(el("rect", { class: "proc", x: px + 3, y: 22,
					width: (j - k) * LW - 6, height: 18 }, svg),
				"process " + Q[1] + (Q[2] ? " (" + Q[2] + ")" : ""));
				el("text", { x: px + 8, y: 35 }, svg).textContent =
					"pid " + Q[1] + (Q[2] ? " " + Q[2] : "");
				k = j;
			}
			n = m;
		}
		cols.forEach(function (l) {
			const L = D.lanes[l];
			el("text", { x: x(l), y: TOP - 8, "text-anchor": "middle" },
				svg).textContent = "QP " + L[1] + (L[2] ? " " + L[2] : "");
			explain(el("line", { class: "lane", x1: x(l), y1: TOP - 4,
				x2: x(l), y2: height - 4 }, svg), laneName(l));
		});
	}

	function band(r, width, step) {
		const g = el("g", {}, svg);
		el("rect", { class: "band", x: 2, y: r.y - step / 2 + 1,
			width: width - 4, height: step - 2 }, g);
		el("text", { x: LEFT, y: r.y + 4 }, g).textContent = "\u00d7 " +
			r.band + " more of the pattern of " + r.p + " events above (" +
			r.evs.length + " events folded)";
		explain(g, "folded: " + r.evs.length + " events, t=+" +
			us(D.ev[r.evs[0]][0]) + " to +" +
			us(D.ev[r.evs[r.evs.length - 1]][0]) + " us");
	}

	// A work request: a bracket on its lane from its post to its
	// completion (send queue left of the lane, receive queue right).
	function brackets(x, y, drawn, c) {
		D.wrs.forEach(function (w) {
			const [lane, post, cqe, first, last, npkts, recv, err] = w;
			if (lane < 0 || !shown[lane] || !drawn[post])
				return;
			const end = cqe >= 0 && y[cqe] !== undefined ? cqe :
				last >= 0 && y[last] !== undefined ? last : post;
			const y0 = y[post], y1 = Math.max(y[end], y0 + 6);
			const bx = x(lane) + (recv ? 12 : -12), d = recv ? -5 : 5;
			const p = el("path", { class: "wr" + (err ? " err" : ""),
				d: "M" + (bx + d) + " " + y0 + "H" + bx + "V" + y1 +
				"H" + (bx + d) }, svg);
			let text = (recv ? "receive" : "send") + " work request, " +
				npkts + " packets\npost: " + evText(post);
			if (cqe >= 0)
				text += "\n\ncompletion: " + evText(cqe);
			else
				text += "\n\n(no completion in the trace)";
			explain(p, text);
			c.wrs++;
			// For the self-check: each WR as its opcode and how it
			// ended, in the order they were posted.
			c.wrlist.push((recv ? "RECV" : opOf(post)) + ":" +
				(cqe >= 0 ? (/ status=(\S+)/.exec(" " + D.ev[cqe][3]) ||
					[0, "?"])[1] : "none"));
		});
	}

	function arrows(x, y, drawn, c) {
		D.arrows.forEach(function (a) {
			const [tx, end, fl, tl, cls] = a;
			const dropped = end >= 0 && D.ev[end][2] === "drop";
			const txOk = tx >= 0 && drawn[tx] && fl >= 0 && shown[fl];
			const endOk = end >= 0 && drawn[end];
			if (!txOk && !endOk)
				return;
			const kind = cls === "drop" ? "drop" : cls;
			let x0, y0, x1, y1, stub = false;
			if (txOk) {
				x0 = x(fl);
				y0 = y[tx];
			}
			const toX = tl >= 0 && shown[tl] && tl !== fl ? x(tl) : null;
			if (endOk) {
				x1 = dropped ? (toX !== null ? toX : x(D.ev[end][1]) + LW / 3)
					: x(D.ev[end][1]);
				y1 = y[end];
			}
			if (!txOk) {
				stub = true;
				x0 = x1 - LW / 3;
				y0 = y1;
			} else if (!endOk) {
				stub = true;
				x1 = toX !== null ? (x0 + toX) / 2 : x0 + LW / 3;
				y1 = y0;
			}
			const g = el("g", {}, svg);
			el("line", { class: "arrow " + kind + (stub ? " stub" : ""),
				x1: x0, y1: y0, x2: x1, y2: y1 }, g);
			if (dropped) {
				el("path", { class: "arrow drop", d: "M" + (x1 - 5) + " " +
					(y1 - 5) + "l10 10m0 -10l-10 10" }, g);
			} else if (endOk) {
				const dx = x1 > x0 ? -7 : 7;
				el("path", { class: "head " + kind, d: "M" + x1 + " " + y1 +
					"l" + dx + " -4v8z" }, g);
			}
			if (!stub && tx >= 0)
				el("text", { class: "plabel", x: (x0 + x1) / 2,
					y: (y0 + y1) / 2 - 3, "text-anchor": "middle" },
					g).textContent = packetLabel(tx);
			let text = "packet (" + (dropped ? "dropped" : kind) + ")";
			if (tx >= 0)
				text += "\n\ntx: " + evText(tx);
			if (end >= 0)
				text += "\n\n" + D.ev[end][2] + ": " + evText(end);
			explain(g, text);
			if (stub) {
				c.stubs++;
				return;
			}
			c.arrows++;
			if (cls === "ack" || cls === "nak")
				c.acks++;
		});
	}

	// An event's mark on its lane: errors in colour, QP states named.
	function mark(i, x, yy, c) {
		const e = D.ev[i], l = e[1];
		if (l < 0 || !shown[l])
			return;
		c.events++;
		const cx = x(l), err = e[4];
		let node;
		if (err)
			c.errors++;
		switch (e[2]) {
		case "qp_state": case "qp_create": case "qp_destroy": {
			const to = / to=(\S+)/.exec(" " + e[3]);
			node = el("g", {}, svg);
			el("path", { class: "state" + (err ? " err" : ""),
				d: "M" + cx + " " + (yy - 5) + "l5 5l-5 5l-5 -5z" }, node);
			el("text", { x: cx + 8, y: yy + 4, class: err ? "err" : "" },
				node).textContent = e[2] === "qp_state" && to ? to[1] :
				e[2].slice(3);
			break;
		}
		case "post_send": case "post_recv":
			node = el("rect", { class: "mark", x: cx - 4, y: yy - 4,
				width: 8, height: 8 }, svg);
			el("text", { x: cx + (e[2] === "post_send" ? -18 : 18),
				y: yy + 4, "text-anchor": e[2] === "post_send" ? "end" :
				"start" }, svg).textContent = opOf(i) || "RECV";
			break;
		case "retry": case "rnr_wait":
			node = el("g", {}, svg);
			el("path", { class: "warn", d: "M" + cx + " " + (yy - 6) +
				"l6 11h-12z" }, node);
			el("text", { x: cx + 8, y: yy + 4, class: "warn" }, node)
				.textContent = e[2] + " " + e[3];
			break;
		default:
			node = el("circle", { class: err ? "err" : "mark", cx: cx,
				cy: yy, r: e[2] === "cqe" ? 5 : 2.5 }, svg);
			if (err)
				el("text", { x: cx + 8, y: yy + 4, class: "err" }, svg)
					.textContent = e[2] + " " + e[3];
		}
		el("text", { x: LEFT - 6, y: yy + 3, class: "time",
			"text-anchor": "end" }, svg).textContent = us(e[0]);
		explain(node, evText(i));
	}

	function controls() {
		const qps = document.getElementById("qps");
		D.lanes.forEach(function (L, l) {
			const lab = document.createElement("label");
			const box = document.createElement("input");
			box.type = "checkbox";
			box.checked = true;
			box.addEventListener("change", function () {
				shown[l] = box.checked;
				draw();
			});
			lab.appendChild(box);
			lab.appendChild(document.createTextNode(laneName(l)));
			qps.appendChild(lab);
		});
		document.getElementById("apply").addEventListener("click", function () {
			const f = parseFloat(document.getElementById("from").value);
			const t = parseFloat(document.getElementById("to").value);
			from = isNaN(f) ? 0 : f * 1000;
			to = isNaN(t) ? Infinity : t * 1000;
			draw();
		});
		document.getElementById("zin").addEventListener("click", function () {
			zoom = Math.min(zoom * 1.5, 20);
			draw();
		});
		document.getElementById("zout").addEventListener("click", function () {
			zoom = Math.max(zoom / 1.5, 0.1);
			draw();
		});
		document.getElementById("wrap").addEventListener("wheel", function (ev) {
			if (!ev.ctrlKey)
				return;
			ev.preventDefault();
			zoom = Math.min(Math.max(zoom * (ev.deltaY < 0 ? 1.25 : 0.8),
				0.1), 20);
			draw();
		}, { passive: false });
	}

	try {
		controls();
		draw();
	} catch (e) {
		document.body.setAttribute("data-selfcheck", "error: " + e.message);
		throw e;
	}
})();
