/* SPDX-License-Identifier: MIT */
/*
 * copy.c - a large payload's copy into a record, by whole aligned cache
 * lines where the CPU has 64-byte vector stores (AVX-512), else libc's
 * memcpy.
 *
 * A payload starts where its record's 8-byte header ends, on a line
 * boundary one time in eight, and libc's memcpy stores a copy of up to
 * 512 bytes in unaligned vectors from both ends: the other seven times
 * every store of a 512-byte payload is split across two lines.
 * While the consumer keeps up, each line a write stores to must first come
 * back from the consumer's cache, and the stores wait for it in the store
 * buffer, in order: with one aligned store per line, fewer of them hold
 * more lines on their way at once.  Measured in perf/README.md ("Large
 * payloads by whole lines"), which also sets the range of lengths
 * (LULL_COPY_LINES_MIN, LULL_COPY_LINES_MAX in record.h).
 */
#include <string.h>

#include "record.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/*
 * The first line's part with one unaligned store, every whole line after
 * it with an aligned one, the rest with one unaligned store that ends
 * where the payload does (the first and last overlap the aligned ones).
 * Kept in this shape: a form that loaded the last 64 bytes before the
 * loop and ran it to an end pointer made 1 KiB payloads 0.95x libc's copy
 * instead of 1.2x, for reasons not settled.  @len >= 64.
 */
__attribute__((target("avx512f"))) static void
copy_lines_avx512(unsigned char *dst, const unsigned char *src, size_t len)
{
	size_t head = (size_t)(-(uintptr_t)dst & 63);

	_mm512_storeu_si512(dst, _mm512_loadu_si512(src));
	dst += head;
	src += head;
	len -= head;
	for (; len >= 64; dst += 64, src += 64, len -= 64)
		_mm512_store_si512(dst, _mm512_loadu_si512(src));
	if (len)
		_mm512_storeu_si512(dst + len - 64,
				    _mm512_loadu_si512(src + len - 64));
}

void lull__copy_lines(void *dst, const void *src, size_t len)
{
	/*
	 * A load and a test of libgcc's CPU flags (AVX-512 state enabled by
	 * the kernel included), set by its constructor; still zero before
	 * that runs, which picks memcpy.
	 */
	if (__builtin_cpu_supports("avx512f"))
		copy_lines_avx512(dst, src, len);
	else
		memcpy(dst, src, len);
}
#else
void lull__copy_lines(void *dst, const void *src, size_t len)
{
	memcpy(dst, src, len);
}
#endif
