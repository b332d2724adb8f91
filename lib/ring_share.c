/* SPDX-License-Identifier: MIT */
/*
 * ring_share.c - rings between processes: a region in a memfd or in a
 * named file (tmpfs, hugetlbfs), opened again from its descriptor, passed
 * over a Unix socket, or found by path.  What a shared region adds to the
 * protocol (slots, death) is in ring_death.c.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "handles.h"

/* The seals every shared memfd carries: its size is fixed for good. */
#define SHARED_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

static int map_shared(int fd, uint64_t size, void **memp)
{
	*memp = NULL;
	int saved_errno = errno;
	void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int err = errno;

	errno = saved_errno;
	if (mem == MAP_FAILED)
		return -err;
	*memp = mem;
	return 0;
}

/*
 * Lay out a new shared region in @fd, which holds @map_size bytes of
 * zeroes, and make the creator's handle.  The handle owns @fd from here
 * on, also on failure (closed then).
 */
static int create_in_fd(struct lull_ring **ringp, int fd, uint64_t size,
			uint64_t map_size, size_t capacity, unsigned flags,
			unsigned share_flags)
{
	void *mem;
	int ret;

	ret = map_shared(fd, map_size, &mem);
	if (ret < 0)
		goto fail;
	ret = lull__ring_make(ringp, mem, size, capacity, flags,
			      LULL_REGION_SHARED, true,
			      !(share_flags & LULL_SHARE_NO_CONSUMER));
	if (ret < 0) {
		munmap(mem, map_size);
		goto fail;
	}
	(*ringp)->shm_fd = fd;
	(*ringp)->map_size = map_size;
	return 0;
fail:
	LULL_SYSCALL(close(fd));
	return ret;
}

static int create_check(struct lull_ring **ringp, size_t capacity,
			unsigned flags, unsigned share_flags, ssize_t *sizep)
{
	if (!ringp || (share_flags & ~LULL_SHARE_NO_CONSUMER))
		return -EINVAL;
	*sizep = lull__region_size(capacity, flags, LULL_REGION_SHARED);
	return *sizep < 0 ? (int)*sizep : 0;
}

LULL_EXPORT int lull_ring_create_shared(struct lull_ring **ringp,
					size_t capacity, unsigned flags,
					unsigned share_flags)
{
	ssize_t size;
	long fd, ret;

	ret = create_check(ringp, capacity, flags, share_flags, &size);
	if (ret < 0)
		return (int)ret;
	fd = LULL_SYSCALL(memfd_create("lull-ring",
				       MFD_CLOEXEC | MFD_ALLOW_SEALING));
	if (fd < 0)
		return (int)fd;
	ret = LULL_SYSCALL(ftruncate((int)fd, size));
	if (ret == 0)
		ret = LULL_SYSCALL(fcntl((int)fd, F_ADD_SEALS, SHARED_SEALS));
	if (ret < 0) {
		LULL_SYSCALL(close((int)fd));
		return (int)ret;
	}
	return create_in_fd(ringp, (int)fd, (uint64_t)size, (uint64_t)size,
			    capacity, flags, share_flags);
}

LULL_EXPORT int lull_ring_create_named(struct lull_ring **ringp,
				       const char *path, size_t capacity,
				       unsigned flags, unsigned share_flags)
{
	struct stat st;
	uint64_t map_size, block;
	ssize_t size;
	long fd, ret;

	ret = create_check(ringp, capacity, flags, share_flags, &size);
	if (ret < 0)
		return (int)ret;
	if (!path || !*path)
		return -EINVAL;
	fd = LULL_SYSCALL(open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
			       0600));
	if (fd < 0)
		return (int)fd;
	/*
	 * A whole number of the file system's blocks: hugetlbfs maps only
	 * whole huge pages (its block size), tmpfs whole pages.
	 */
	ret = LULL_SYSCALL(fstat((int)fd, &st));
	if (ret == 0) {
		block = st.st_blksize > 0 ? (uint64_t)st.st_blksize : 4096;
		map_size = ((uint64_t)size + block - 1) / block * block;
		ret = LULL_SYSCALL(ftruncate((int)fd, (off_t)map_size));
	}
	if (ret == 0)
		ret = create_in_fd(ringp, (int)fd, (uint64_t)size, map_size,
				   capacity, flags, share_flags);
	else
		LULL_SYSCALL(close((int)fd));
	if (ret < 0)
		LULL_SYSCALL(unlink(path));
	return (int)ret;
}

/*
 * Is @fd something a shared region can be in: a regular file (memfds are)
 * of at least the header's size, and, for a memfd, sealed against
 * shrinking, so that no process can cut the mapping under the others.
 * Returns its size in *sizep, 0, or a negative errno.
 */
/* Is @fd a memfd?  Its /proc link says so ("/memfd:NAME (deleted)"). */
static bool is_memfd(int fd)
{
	char path[40] = "/proc/self/fd/", digits[12], link[16];
	size_t n = 0, at = 14;
	long got;

	for (unsigned v = (unsigned)fd; v || !n; v /= 10)
		digits[n++] = (char)('0' + v % 10);
	while (n)
		path[at++] = digits[--n];
	path[at] = '\0';
	got = LULL_SYSCALL(readlink(path, link, sizeof(link)));
	return got >= 7 && memcmp(link, "/memfd:", 7) == 0;
}

static int fd_check(int fd, uint64_t *sizep)
{
	struct stat st;
	long ret, seals;

	ret = LULL_SYSCALL(fstat(fd, &st));
	if (ret < 0)
		return (int)ret;
	if (!S_ISREG(st.st_mode) || st.st_size < LULL_REGION_LANES_OFFSET)
		return -EINVAL;
	/*
	 * A memfd must be sealed against shrinking, or any process holding
	 * it could cut the mapping under the others (SIGBUS).  A file opened
	 * by name (tmpfs, hugetlbfs) cannot be sealed: its permissions are
	 * all that guard its size.
	 */
	seals = LULL_SYSCALL(fcntl(fd, F_GET_SEALS));
	if (is_memfd(fd) && (seals < 0 || !(seals & F_SEAL_SHRINK)))
		return -EINVAL;
	*sizep = (uint64_t)st.st_size;
	return 0;
}

LULL_EXPORT int lull_ring_open_fd(struct lull_ring **ringp, int fd,
				  unsigned flags)
{
	uint64_t size;
	void *mem;
	long own;
	int ret;

	if (!ringp || fd < 0 || (flags & ~LULL_OPEN_CONSUMER))
		return -EINVAL;
	ret = fd_check(fd, &size);
	if (ret < 0)
		return ret;
	own = LULL_SYSCALL(fcntl(fd, F_DUPFD_CLOEXEC, 0));
	if (own < 0)
		return (int)own;
	ret = map_shared((int)own, size, &mem);
	if (ret == 0) {
		ret = lull__ring_open(ringp, mem, size, flags, true);
		if (ret < 0)
			munmap(mem, size);
	}
	if (ret < 0) {
		LULL_SYSCALL(close((int)own));
		return ret;
	}
	(*ringp)->shm_fd = (int)own;
	(*ringp)->map_size = size;
	return 0;
}

LULL_EXPORT int lull_ring_open_named(struct lull_ring **ringp,
				     const char *path, unsigned flags)
{
	long fd;
	int ret;

	if (!ringp || !path || !*path)
		return -EINVAL;
	fd = LULL_SYSCALL(open(path, O_RDWR | O_CLOEXEC));
	if (fd < 0)
		return (int)fd;
	ret = lull_ring_open_fd(ringp, (int)fd, flags);
	LULL_SYSCALL(close((int)fd));
	return ret;
}

LULL_EXPORT int lull_ring_fd(const struct lull_ring *ring)
{
	if (!ring || ring->shm_fd < 0)
		return -EINVAL;
	return ring->shm_fd;
}

LULL_EXPORT int lull_ring_send(const struct lull_ring *ring, int sock)
{
	char byte = 'L';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} control;
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = control.buf,
		.msg_controllen = sizeof(control.buf),
	};
	struct cmsghdr *cmsg;
	long ret;

	if (!ring || ring->shm_fd < 0 || sock < 0)
		return -EINVAL;
	memset(&control, 0, sizeof(control));
	cmsg = CMSG_FIRSTHDR(&msg);
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cmsg), &ring->shm_fd, sizeof(int));
	do
		ret = LULL_SYSCALL(sendmsg(sock, &msg, MSG_NOSIGNAL));
	while (ret == -EINTR);
	return ret < 0 ? (int)ret : 0;
}

/* Close every descriptor a message brought, but @keep. */
static void close_received(struct msghdr *msg, int keep)
{
	struct cmsghdr *cmsg;
	size_t n;
	int fd;

	for (cmsg = CMSG_FIRSTHDR(msg); cmsg; cmsg = CMSG_NXTHDR(msg, cmsg)) {
		if (cmsg->cmsg_level != SOL_SOCKET ||
		    cmsg->cmsg_type != SCM_RIGHTS)
			continue;
		n = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int),
			       sizeof(int));
			if (fd != keep)
				LULL_SYSCALL(close(fd));
		}
	}
}

LULL_EXPORT int lull_ring_recv(struct lull_ring **ringp, int sock,
			       unsigned flags)
{
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	/* Room for a few: a peer that sends more gets them all closed. */
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(8 * sizeof(int))];
	} control;
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = control.buf,
		.msg_controllen = sizeof(control.buf),
	};
	struct cmsghdr *cmsg;
	int fd = -1, ret;
	long got;

	if (!ringp || sock < 0 || (flags & ~LULL_OPEN_CONSUMER))
		return -EINVAL;
	do
		got = LULL_SYSCALL(recvmsg(sock, &msg, MSG_CMSG_CLOEXEC));
	while (got == -EINTR);
	if (got < 0)
		return (int)got;
	cmsg = CMSG_FIRSTHDR(&msg);
	if (got == 1 && !(msg.msg_flags & MSG_CTRUNC) && cmsg &&
	    cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS &&
	    cmsg->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(cmsg), sizeof(int));
	close_received(&msg, fd);
	if (fd < 0)
		return -EBADMSG;
	ret = lull_ring_open_fd(ringp, fd, flags);
	LULL_SYSCALL(close(fd));
	return ret;
}
