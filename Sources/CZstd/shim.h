#ifndef ENCFS_CZSTD_SHIM_H
#define ENCFS_CZSTD_SHIM_H

// Only libzstd's stable API is used: one compression and one
// decompression context per thread (ZSTD_createCCtx, ZSTD_createDCtx),
// parameters through ZSTD_CCtx_setParameter / ZSTD_DCtx_setParameter, and
// one-shot ZSTD_compress2 / ZSTD_decompressDCtx into caller buffers.
// Nothing here needs ZSTD_STATIC_LINKING_ONLY.
#include <zstd.h>

// ZSTD_isError takes and returns size_t; it is a real function and imports
// as is. The parameter enums import as Swift enums; no shims are needed.

#endif
