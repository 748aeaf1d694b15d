// SPDX-License-Identifier: MIT
/*
 * gloo's collectives over its ibverbs transport, one rank per process:
 *
 *   gloo_collectives RANK SIZE STORE_DIR [MIN_BYTES MAX_BYTES [DEVICE]]
 *
 * The ranks meet through a gloo FileStore in STORE_DIR, connect a full
 * mesh of RC QPs on DEVICE (ibemu0 by default) through
 * gloo::transport::ibverbs::CreateDevice({DEVICE, 1, 0}), port 1 and GID
 * index 0, and then run AllreduceRing, AllreduceRingChunked,
 * AllreduceHalvingDoubling, BroadcastOneToAll (from every root in turn),
 * AllgatherRing and BarrierAllToAll on buffers of MIN_BYTES to
 * MAX_BYTES, each size four times the last.  Every element of every
 * result is checked against what the ranks' inputs make it.  Exits 0 if
 * all match, 1 with a line naming the collective, size and element that
 * did not, or gloo's own error (an IoException names the work
 * completion status that failed).
 */
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gloo/allgather_ring.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/barrier_all_to_all.h"
#include "gloo/broadcast_one_to_all.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/ibverbs/device.h"

namespace {

using Ctx = std::shared_ptr<gloo::Context>;

/*
 * A send to every peer, each waited for, and a receive from every peer.
 * Debian's gloo (2022) refuses to destroy a Buffer with a send in flight
 * (an enforce in ~Buffer, so std::terminate; upstream made it a warning
 * in 2025, 7a4c857), yet its algorithms return from run() without waiting for
 * their last notification sends: whether those completed by the time the
 * algorithm is destroyed is a race on any device.  Send completions of
 * one QP come in order, and gloo handles them in order, so once this
 * fence's send to a peer has completed, every earlier send to it has:
 * the algorithm before the fence may then be destroyed.  The fence's own
 * sends are all waited for: it may be destroyed at any time.
 */
class SendFence {
public:
	explicit SendFence(const Ctx &ctx) : ctx_(ctx), words_(2 * ctx->size)
	{
		int slot = ctx->nextSlot();

		for (int i = 0; i < ctx->size; i++) {
			if (i == ctx->rank)
				continue;
			auto &pair = ctx->getPair(i);
			send_.push_back(pair->createSendBuffer(
				slot, &words_[2 * i], sizeof(int)));
			recv_.push_back(pair->createRecvBuffer(
				slot, &words_[2 * i + 1], sizeof(int)));
		}
	}

	void run()
	{
		for (auto &b : send_)
			b->send();
		for (auto &b : send_)
			b->waitSend();
		for (auto &b : recv_)
			b->waitRecv();
	}

private:
	Ctx ctx_;
	std::vector<int> words_;
	std::vector<std::unique_ptr<gloo::transport::Buffer>> send_, recv_;
};

/* Rank r's input: integers, so that every sum is exact.  Depends on
 * rank, element and round, so a stale or misplaced block shows. */
int32_t input(int rank, size_t i, int round)
{
	return (int32_t)((rank + 1) * 1000 + (i % 997) + round * 7);
}

bool report(const char *what, size_t bytes, size_t i, int32_t got,
	    int32_t want)
{
	std::fprintf(stderr,
		     "gloo_collectives: %s %zu bytes: element %zu is %" PRId32
		     ", expected %" PRId32 "\n",
		     what, bytes, i, got, want);
	return false;
}

/* An allreduce (sum) algorithm A of count elements: every rank ends
 * with the sum of the inputs. */
template <template <typename> class A>
bool check_allreduce(const Ctx &ctx, SendFence &fence, const char *what,
		     size_t count, int round)
{
	std::vector<int32_t> buf(count);
	std::vector<int32_t *> ptrs{buf.data()};
	int32_t want;

	for (size_t i = 0; i < count; i++)
		buf[i] = input(ctx->rank, i, round);
	A<int32_t> algo(ctx, ptrs, (int)count);
	algo.run();
	fence.run();
	for (size_t i = 0; i < count; i++) {
		want = 0;
		for (int r = 0; r < ctx->size; r++)
			want += input(r, i, round);
		if (buf[i] != want)
			return report(what, count * 4, i, buf[i], want);
	}
	return true;
}

/* BroadcastOneToAll from each root in turn: every rank ends with the
 * root's input. */
bool check_broadcast(const Ctx &ctx, SendFence &fence, size_t count,
		     int round)
{
	std::vector<int32_t> buf(count);
	std::vector<int32_t *> ptrs{buf.data()};

	for (int root = 0; root < ctx->size; root++) {
		for (size_t i = 0; i < count; i++)
			buf[i] = input(ctx->rank, i, round);
		gloo::BroadcastOneToAll<int32_t> algo(ctx, ptrs, count, root);
		algo.run();
		fence.run();
		for (size_t i = 0; i < count; i++)
			if (buf[i] != input(root, i, round))
				return report("BroadcastOneToAll", count * 4, i,
					      buf[i], input(root, i, round));
	}
	return true;
}

/* AllgatherRing: the output of count elements holds each rank's block
 * of count / size elements, in rank order. */
bool check_allgather(const Ctx &ctx, SendFence &fence, size_t count,
		     int round)
{
	size_t block = count / (size_t)ctx->size;
	std::vector<int32_t> in(block), out(block * (size_t)ctx->size, -1);
	std::vector<const int32_t *> ptrs{in.data()};
	int32_t want;
	size_t i;

	for (i = 0; i < block; i++)
		in[i] = input(ctx->rank, i, round);
	gloo::AllgatherRing<int32_t> algo(ctx, ptrs, out.data(), (int)block);
	algo.run();
	fence.run();
	for (i = 0; i < out.size(); i++) {
		want = input((int)(i / block), i % block, round);
		if (out[i] != want)
			return report("AllgatherRing", block * 4, i, out[i],
				      want);
	}
	return true;
}

bool run_size(const Ctx &ctx, SendFence &fence, size_t bytes, int round)
{
	size_t count = bytes / sizeof(int32_t);

	if (!check_allreduce<gloo::AllreduceRing>(ctx, fence, "AllreduceRing",
						  count, round) ||
	    !check_allreduce<gloo::AllreduceRingChunked>(
		    ctx, fence, "AllreduceRingChunked", count, round) ||
	    !check_allreduce<gloo::AllreduceHalvingDoubling>(
		    ctx, fence, "AllreduceHalvingDoubling", count, round) ||
	    !check_broadcast(ctx, fence, count, round) ||
	    !check_allgather(ctx, fence, count, round))
		return false;
	gloo::BarrierAllToAll barrier(ctx);
	barrier.run();
	fence.run();
	return true;
}

/*
 * Before the context goes: let gloo's device thread finish handling the
 * completions the last fence waited for.  Debian's gloo (2022) destroys
 * a pair without its lock, while that thread may still be in the pair's
 * completion handler, past the point where it woke the waiter (a
 * receive's handler posts the next receive last): the pair would be
 * freed under it, on any device.  Upstream added the lock in 2025
 * (7a4c857).  The thread needs microseconds; it gets a fifth of a
 * second.  Nothing is asserted on the time.
 */
void settle()
{
	std::this_thread::sleep_for(std::chrono::milliseconds(200));
}

int usage()
{
	std::fprintf(stderr, "usage: gloo_collectives RANK SIZE STORE_DIR "
			     "[MIN_BYTES MAX_BYTES [DEVICE]]\n");
	return 2;
}

} // namespace

int main(int argc, char **argv)
{
	size_t min_bytes = 4096, max_bytes = 16u << 20, bytes;
	std::string device = "ibemu0";
	int rank, size, round = 0;

	if (argc != 4 && argc != 6 && argc != 7)
		return usage();
	rank = std::atoi(argv[1]);
	size = std::atoi(argv[2]);
	if (argc >= 6) {
		min_bytes = std::strtoull(argv[4], nullptr, 0);
		max_bytes = std::strtoull(argv[5], nullptr, 0);
	}
	if (argc == 7)
		device = argv[6];
	/* Each rank's allgather block must be whole elements. */
	if (size < 1 || rank < 0 || rank >= size || min_bytes < 4 ||
	    min_bytes > max_bytes ||
	    min_bytes % (sizeof(int32_t) * (size_t)size))
		return usage();
	try {
		auto dev = gloo::transport::ibverbs::CreateDevice(
			{device, 1, 0});
		gloo::rendezvous::FileStore store(argv[3]);
		auto ctx = std::make_shared<gloo::rendezvous::Context>(rank,
								       size);
		ctx->connectFullMesh(store, dev);
		SendFence fence(ctx);
		for (bytes = min_bytes; bytes <= max_bytes; bytes *= 4)
			if (!run_size(ctx, fence, bytes, round++))
				return 1;
		settle();
	} catch (const std::exception &e) {
		std::fprintf(stderr, "gloo_collectives: rank %d: %s\n", rank,
			     e.what());
		return 1;
	}
	std::printf("gloo_collectives: rank %d of %d: %zu to %zu bytes: ok\n",
		    rank, size, min_bytes, max_bytes);
	return 0;
}
