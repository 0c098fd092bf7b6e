#ifndef ENCFS_CZSTD_SHIM_H
#define ENCFS_CZSTD_SHIM_H

// libzstd's stable API, plus two functions of its "static linking only"
// section that the shared library exports (since 1.3): ZSTD_estimateDCtxSize
// and ZSTD_initStaticDCtx, so that a reader's decompression context, whose
// buffers hold decoded literals (plaintext), lives in memory the reader
// locks and wipes instead of in libzstd's unwiped heap. Otherwise: one
// compression context per packing thread (ZSTD_createCCtx), parameters
// through ZSTD_CCtx_setParameter / ZSTD_DCtx_setParameter, and one-shot
// ZSTD_compress2 / ZSTD_decompressDCtx into caller buffers.
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

// ZSTD_isError takes and returns size_t; it is a real function and imports
// as is. The parameter enums import as Swift enums; no shims are needed.

#endif
