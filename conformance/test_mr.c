// SPDX-License-Identifier: MIT
/*
 * Memory regions: manual 3.4.3/3.4.6 (ibv_reg_mr, ibv_dereg_mr), IBA
 * 10.6.3 (memory registration) and 11.2.8.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tests.h"

#define MR_LEN 4096

static const int remote_bits = IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_ATOMIC;

/*
 * IBA 10.6.3.1: remote write or remote atomic access requires
 * local write access; the kernel's ib_check_mr_access() refuses the
 * combination with EINVAL, and so must every provider.
 */
CF_TEST_IMPL(mr, access_combinations)
{
	static const int bits[] = {
		IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_WRITE,
		IBV_ACCESS_REMOTE_READ, IBV_ACCESS_REMOTE_ATOMIC,
	};
	char *buf = calloc(1, MR_LEN);
	unsigned int combo;
	size_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	for (combo = 0; combo < 1u << CF_ARRAY_SIZE(bits); combo++) {
		struct ibv_mr *mr;
		int access = 0;
		bool valid;

		for (i = 0; i < CF_ARRAY_SIZE(bits); i++)
			if (combo & (1u << i))
				access |= bits[i];
		valid = !(access & remote_bits) ||
			(access & IBV_ACCESS_LOCAL_WRITE);
		errno = 0;
		mr = ibv_reg_mr(cf.pd, buf, MR_LEN, access);
		if (valid) {
			CF_CHECK(mr != NULL, "ibv_reg_mr(access 0x%x): %s",
				 access, cf_errname(errno));
			if (!mr)
				continue;
			CF_CHECK(mr->addr == buf && mr->length == MR_LEN &&
				 mr->pd == cf.pd && mr->context == cf.ctx,
				 "MR fields wrong (access 0x%x)", access);
			CF_EXPECT_OK(cf_rc(ibv_dereg_mr(mr)), "ibv_dereg_mr");
		} else {
			CF_CHECK(mr == NULL && errno == EINVAL,
				 "ibv_reg_mr(access 0x%x without LOCAL_WRITE): "
				 "expected NULL/EINVAL, got %s/%s", access,
				 mr ? "MR" : "NULL", cf_errname(errno));
			if (mr)
				ibv_dereg_mr(mr);
		}
	}
	free(buf);
}

/* Access bits the verbs do not define are refused (ib_check_mr_access). */
CF_TEST_IMPL(mr, unknown_access)
{
	static const int unknown[] = { 1 << 15, 1 << 18 };
	char *buf = calloc(1, MR_LEN);
	size_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	for (i = 0; i < CF_ARRAY_SIZE(unknown); i++) {
		int access = IBV_ACCESS_LOCAL_WRITE | unknown[i];
		struct ibv_mr *mr;

		errno = 0;
		mr = ibv_reg_mr(cf.pd, buf, MR_LEN, access);
		CF_CHECK(mr == NULL && errno == EINVAL,
			 "ibv_reg_mr(access 0x%x): expected NULL/EINVAL, "
			 "got %s/%s", access, mr ? "MR" : "NULL",
			 cf_errname(errno));
		if (mr)
			ibv_dereg_mr(mr);
	}
	free(buf);
}

#define NKEYS 16

static bool key_in(uint32_t key, const uint32_t *keys, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (keys[i] == key)
			return true;
	return false;
}

/*
 * IBA 10.6.3: L_Key and R_Key identify one region; a key of a destroyed
 * region must not silently name a new one (IBA 10.6.3.3 key "variant"
 * part, so stale keys held by a peer fail instead of hitting new memory).
 */
CF_TEST_IMPL(mr, keys_unique)
{
	uint32_t old_l[NKEYS * 4], old_r[NKEYS * 4];
	struct ibv_mr *mr[NKEYS];
	int round, i, n_old = 0;
	char *buf = calloc(NKEYS, MR_LEN);

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	for (round = 0; round < 4; round++) {
		uint32_t l[NKEYS], r[NKEYS];
		int n = 0;

		for (i = 0; i < NKEYS; i++) {
			mr[i] = ibv_reg_mr(cf.pd, buf + i * MR_LEN, MR_LEN,
					   IBV_ACCESS_LOCAL_WRITE |
					   IBV_ACCESS_REMOTE_WRITE |
					   IBV_ACCESS_REMOTE_READ);
			CF_CHECK(mr[i] != NULL, "ibv_reg_mr: %s",
				 cf_errname(errno));
			if (!mr[i])
				continue;
			CF_CHECK(!key_in(mr[i]->lkey, l, n),
				 "lkey 0x%x of two live MRs", mr[i]->lkey);
			CF_CHECK(!key_in(mr[i]->rkey, r, n),
				 "rkey 0x%x of two live MRs", mr[i]->rkey);
			CF_CHECK(!key_in(mr[i]->lkey, old_l, n_old),
				 "round %d: lkey 0x%x reused after dereg",
				 round, mr[i]->lkey);
			CF_CHECK(!key_in(mr[i]->rkey, old_r, n_old),
				 "round %d: rkey 0x%x reused after dereg",
				 round, mr[i]->rkey);
			l[n] = mr[i]->lkey;
			r[n] = mr[i]->rkey;
			n++;
		}
		for (i = 0; i < NKEYS; i++)
			if (mr[i])
				CF_EXPECT_OK(cf_rc(ibv_dereg_mr(mr[i])),
					     "ibv_dereg_mr");
		memcpy(old_l + n_old, l, n * sizeof(*l));
		memcpy(old_r + n_old, r, n * sizeof(*r));
		n_old += n;
	}
	free(buf);
}

/*
 * ibv_reg_mr_iova(3): the region is addressed by iova; mr->addr and
 * mr->length stay the application's.  An IOVA with the address's offset
 * within its page is what every device takes (the Linux core maps a
 * region page by page); one with another offset is refused by the Linux
 * core for every kernel device (ib_uverbs_reg_mr: EINVAL) while the IBA
 * (10.6.3.1: the consumer names the region's virtual address) and the man
 * page leave it open: the device's choice, reported.
 */
static void mr_reg_iova_one(char *buf, uint64_t iova, bool same_offset)
{
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_reg_mr_iova(cf.pd, buf, MR_LEN, iova,
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!same_offset) {
		CF_CHECK(mr || errno == EINVAL, "ibv_reg_mr_iova(page offset "
			 "0x%lx, iova offset 0x%llx): expected an MR or EINVAL, "
			 "got %s", (unsigned long)((uintptr_t)buf & 0xfff),
			 (unsigned long long)(iova & 0xfff),
			 cf_errname(errno));
		CF_CHOICE("an IOVA whose page offset differs from the "
			  "address's is %s", mr ? "accepted" : "refused (EINVAL)");
	} else {
		CF_CHECK(mr != NULL, "ibv_reg_mr_iova(same page offset): %s",
			 cf_errname(errno));
	}
	if (!mr)
		return;
	CF_CHECK(mr->addr == buf, "mr->addr %p, expected %p", mr->addr,
		 (void *)buf);
	CF_CHECK(mr->length == MR_LEN, "mr->length %zu", mr->length);
	CF_EXPECT_OK(cf_rc(ibv_dereg_mr(mr)), "ibv_dereg_mr");
}

CF_TEST_IMPL(mr, reg_iova)
{
	const uint64_t iova = 0x100000000ull + 0x10000;
	char *page;

	page = mmap(NULL, 2 * MR_LEN + 4096, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CU_ASSERT_FATAL(page != MAP_FAILED);
	mr_reg_iova_one(page, iova, true);
	mr_reg_iova_one(page + 0x40, iova + 0x40, true);
	mr_reg_iova_one(page + 0x40, iova, false);
	munmap(page, 2 * MR_LEN + 4096);
}

/* A zero-length region is either accepted or refused with EINVAL. */
CF_TEST_IMPL(mr, zero_length)
{
	char buf[64];
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_reg_mr(cf.pd, buf, 0, IBV_ACCESS_LOCAL_WRITE);
	if (mr)
		CF_EXPECT_OK(cf_rc(ibv_dereg_mr(mr)),
			     "ibv_dereg_mr(zero length)");
	else
		CF_EXPECT_ERR(errno, EINVAL, "ibv_reg_mr(length 0)");
}

/* A page mapped with prot, or NULL. */
static void *mr_page(int prot)
{
	void *p = mmap(NULL, MR_LEN, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/*
 * IBA 10.6.3 / 11.2.8.1: registration makes the pages accessible to the
 * HCA (the kernel pins them, ib_umem_get, for writing when the region
 * may be written).  Memory the HCA cannot access is refused with EFAULT:
 * a PROT_NONE page to be written.
 */
/* Registering page with access must fail with EFAULT. */
static void mr_expect_efault(void *page, int access, const char *what)
{
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_reg_mr(cf.pd, page, MR_LEN, access);
	CF_CHECK(!mr && errno == EFAULT,
		 "ibv_reg_mr(%s): expected EFAULT, got %s/%s", what,
		 mr ? "MR" : "NULL", cf_errname(errno));
	if (mr)
		ibv_dereg_mr(mr);
}

/*
 * For a region the HCA only reads, the Linux core pins the pages with
 * FOLL_FORCE (ib_umem_get), which reaches a PROT_NONE page too: so
 * registering one read-only is refused with EFAULT or accepted, the
 * device's choice.
 */
CF_TEST_IMPL(mr, prot_none)
{
	void *page = mr_page(PROT_NONE);
	struct ibv_mr *mr;

	CU_ASSERT_PTR_NOT_NULL_FATAL(page);
	mr_expect_efault(page, IBV_ACCESS_LOCAL_WRITE,
			 "PROT_NONE, LOCAL_WRITE");
	errno = 0;
	mr = ibv_reg_mr(cf.pd, page, MR_LEN, IBV_ACCESS_REMOTE_READ);
	CF_CHECK(mr || errno == EFAULT, "ibv_reg_mr(PROT_NONE, REMOTE_READ): "
		 "expected an MR or EFAULT, got %s", cf_errname(errno));
	CF_CHOICE("a PROT_NONE page registered for reading only is %s",
		  mr ? "accepted (pinned as the Linux core does)"
		     : "refused (EFAULT)");
	if (mr)
		ibv_dereg_mr(mr);
	munmap(page, MR_LEN);
}

/*
 * The same for a read-only page: it may be registered for the HCA to
 * read (a SEND source, a READ target), not for it to write.
 */
CF_TEST_IMPL(mr, read_only)
{
	void *page = mr_page(PROT_READ);
	struct ibv_mr *mr;

	CU_ASSERT_PTR_NOT_NULL_FATAL(page);
	mr_expect_efault(page, IBV_ACCESS_LOCAL_WRITE,
			 "PROT_READ, LOCAL_WRITE");
	mr = ibv_reg_mr(cf.pd, page, MR_LEN, IBV_ACCESS_REMOTE_READ);
	CF_CHECK(mr != NULL, "ibv_reg_mr(PROT_READ, REMOTE_READ): %s",
		 cf_errname(errno));
	if (mr)
		CF_EXPECT_OK(cf_rc(ibv_dereg_mr(mr)),
			     "ibv_dereg_mr(read-only region)");
	munmap(page, MR_LEN);
}

/* IBA 11.2.8.1: a region larger than the HCA's maximum is refused. */
CF_TEST_IMPL(mr, too_long)
{
	uint64_t max = cf.dev->max_mr_size;
	struct ibv_mr *mr;
	char buf[64];

	if (max >= SIZE_MAX - 1)
		SKIP("max_mr_size is 0x%llx: no length exceeds it",
		     (unsigned long long)max);
	errno = 0;
	mr = ibv_reg_mr(cf.pd, buf, (size_t)max + 1, IBV_ACCESS_LOCAL_WRITE);
	CF_CHECK(!mr && (errno == EINVAL || errno == EFAULT ||
			 errno == ENOMEM),
		 "ibv_reg_mr(max_mr_size + 1): expected NULL with EINVAL, "
		 "EFAULT or ENOMEM, got %s/%s", mr ? "MR" : "NULL",
		 cf_errname(errno));
	if (mr)
		ibv_dereg_mr(mr);
}

/* One buffer may be registered many times, each MR independent. */
CF_TEST_IMPL(mr, same_buffer_many)
{
	int n = cf.dev->max_mr < 512 ? cf.dev->max_mr - 8 : 512, i, got = 0;
	struct ibv_mr **mrs = calloc(n > 0 ? n : 1, sizeof(*mrs));
	char *buf = calloc(1, MR_LEN);

	CU_ASSERT_PTR_NOT_NULL_FATAL(mrs);
	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	for (i = 0; i < n; i++) {
		mrs[i] = ibv_reg_mr(cf.pd, buf, MR_LEN,
				    IBV_ACCESS_LOCAL_WRITE);
		if (!mrs[i])
			break;
		got++;
	}
	CF_CHECK(got == n, "registered %d of %d MRs on one buffer: %s", got,
		 n, cf_errname(errno));
	for (i = 0; i < got; i++)
		CF_EXPECT_OK(cf_rc(ibv_dereg_mr(mrs[i])), "ibv_dereg_mr");
	free(mrs);
	free(buf);
}

/* One ibv_rereg_mr with errno cleared first; errno is kept in *err_p. */
static int rereg_err(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
		     void *addr, size_t len, int access, int *err_p)
{
	int ret;

	errno = 0;
	ret = ibv_rereg_mr(mr, flags, pd, addr, len, access);
	*err_p = errno;
	return ret;
}

/*
 * ibv_rereg_mr(3) return codes: IBV_REREG_MR_ERR_INPUT (errno EINVAL)
 * for what libibverbs refuses before the device sees it (unknown flags,
 * CHANGE_TRANSLATION with no address or length, access bits without
 * CHANGE_ACCESS), IBV_REREG_MR_ERR_CMD for what the device refuses
 * (remote write without local write, IBA 10.6.3.1; an unmapped range,
 * which the kernel cannot pin).  A refused call leaves the MR's fields as
 * they were, and the MR can still be deregistered (ibv_rereg_mr(3),
 * NOTES).
 */
CF_TEST_IMPL(mr, rereg_errors)
{
	char *buf = calloc(1, 2 * MR_LEN), *hole;
	struct ibv_mr *mr;
	int ret, err;

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	mr = ibv_reg_mr(cf.pd, buf, MR_LEN, IBV_ACCESS_LOCAL_WRITE);
	CU_ASSERT_PTR_NOT_NULL_FATAL(mr);
	ret = rereg_err(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, &err);
	if (ret && (err == EOPNOTSUPP || err == ENOSYS)) {
		ibv_dereg_mr(mr);
		free(buf);
		SKIP("ibv_rereg_mr: %s", cf_errname(err));
	}
	CF_CHECK(ret == 0, "rereg CHANGE_ACCESS: %d (%s)", ret,
		 cf_errname(err));
	ret = rereg_err(mr, IBV_REREG_MR_FLAGS_SUPPORTED + 1, NULL, NULL, 0,
			0, &err);
	CF_CHECK(ret == IBV_REREG_MR_ERR_INPUT && err == EINVAL,
		 "rereg with unknown flags: %d/%s, expected "
		 "IBV_REREG_MR_ERR_INPUT/EINVAL", ret, cf_errname(err));
	ret = rereg_err(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf, 0, 0,
			&err);
	CF_CHECK(ret == IBV_REREG_MR_ERR_INPUT && err == EINVAL,
		 "rereg CHANGE_TRANSLATION of 0 bytes: %d/%s, expected "
		 "IBV_REREG_MR_ERR_INPUT/EINVAL", ret, cf_errname(err));
	ret = rereg_err(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL,
			MR_LEN, 0, &err);
	CF_CHECK(ret == IBV_REREG_MR_ERR_INPUT && err == EINVAL,
		 "rereg CHANGE_TRANSLATION to NULL: %d/%s, expected "
		 "IBV_REREG_MR_ERR_INPUT/EINVAL", ret, cf_errname(err));
	ret = rereg_err(mr, IBV_REREG_MR_CHANGE_PD, cf.pd, NULL, 0,
			IBV_ACCESS_LOCAL_WRITE, &err);
	CF_CHECK(ret == IBV_REREG_MR_ERR_INPUT && err == EINVAL,
		 "rereg with access but without CHANGE_ACCESS: %d/%s, "
		 "expected IBV_REREG_MR_ERR_INPUT/EINVAL", ret,
		 cf_errname(err));
	ret = rereg_err(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			IBV_ACCESS_REMOTE_WRITE, &err);
	CF_CHECK(ret == IBV_REREG_MR_ERR_CMD,
		 "rereg to REMOTE_WRITE without LOCAL_WRITE: %d/%s, "
		 "expected IBV_REREG_MR_ERR_CMD", ret, cf_errname(err));
	hole = mmap(NULL, MR_LEN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		    0);
	CU_ASSERT_FATAL(hole != MAP_FAILED);
	ret = rereg_err(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, hole,
			MR_LEN, 0, &err);
	CF_CHECK(ret == IBV_REREG_MR_ERR_CMD ||
			 ret == IBV_REREG_MR_ERR_CMD_AND_DO_FORK_NEW,
		 "rereg CHANGE_TRANSLATION to a PROT_NONE range: %d/%s, "
		 "expected IBV_REREG_MR_ERR_CMD", ret, cf_errname(err));
	munmap(hole, MR_LEN);
	CF_CHECK(mr->addr == buf && mr->length == MR_LEN && mr->pd == cf.pd,
		 "a refused rereg changed the MR: addr %p length %zu",
		 mr->addr, mr->length);
	CF_EXPECT_OK(cf_rc(ibv_dereg_mr(mr)), "ibv_dereg_mr after refusals");
	free(buf);
}
