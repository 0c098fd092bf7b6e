/*
 * What the chunk size of a compressed bundle costs zstd, measured on real
 * data without the mount around it (docs/PERFORMANCE.md, "Issue 14: the
 * sequential target and the chunk size").
 *
 *   cc -O2 -g -o zstd_frames Scripts/bench/zstd_frames.c -lzstd
 *   valgrind --tool=callgrind ./zstd_frames FILE CHUNK BLOCK [LIMIT [DICT]]
 *   callgrind_annotate --inclusive=yes callgrind.out.* | grep phase_
 *
 * Cuts the first LIMIT bytes of FILE (all of it when 0 or absent) into
 * chunks of CHUNK bytes and compresses each into one zstd frame at level 3
 * with one reused context, as encfs-pack does (content size in the header,
 * no checksum). With BLOCK < CHUNK the frame is made of blocks of BLOCK
 * bytes (ZSTD_e_flush after each), so that a reader may stop inflating
 * after the block that holds what it wants. With DICT > 0 a dictionary of
 * DICT bytes is first trained on every 16th chunk (fastCover) and every
 * frame is compressed and inflated with it (attached, not copied).
 *
 * Three functions hold the three phases, so that callgrind's inclusive
 * counts name each: phase_compress (all chunks), phase_inflate (every
 * chunk inflated whole with ZSTD_decompressDCtx: a sequential read) and
 * phase_partial (1,000 reads of 4 KiB at random 4 KiB-aligned offsets: each
 * inflates its chunk with the buffer-less API and stops after the block
 * that ends past the read; every read is checked against the source).
 * Prints the stored bytes and the average bytes a partial read inflated.
 */
#define ZSTD_STATIC_LINKING_ONLY
#define ZDICT_STATIC_LINKING_ONLY
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zdict.h>
#include <zstd.h>

static unsigned char *source, *stored, *plain;
static size_t sourceLength, chunkSize, blockSize, chunkCount, *frameStart;
static ZSTD_CCtx *compressor;
static ZSTD_DCtx *decompressor;
static ZSTD_DDict *dictionaryForReads;

static void fail(const char *what, size_t code) {
    fprintf(stderr, "zstd_frames: error: %s%s%s\n", what, code ? ": " : "", code ? ZSTD_getErrorName(code) : "");
    exit(1);
}

static size_t chunkLength(size_t chunk) {
    size_t start = chunk * chunkSize;
    return sourceLength - start < chunkSize ? sourceLength - start : chunkSize;
}

__attribute__((noinline)) static void phase_compress(void) {
    size_t at = 0;
    for (size_t chunk = 0; chunk < chunkCount; chunk++) {
        size_t length = chunkLength(chunk);
        const unsigned char *from = source + chunk * chunkSize;
        frameStart[chunk] = at;
        if (blockSize >= chunkSize) {
            size_t written = ZSTD_compress2(compressor, stored + at, ZSTD_compressBound(length), from, length);
            if (ZSTD_isError(written)) fail("compress", written);
            at += written;
            continue;
        }
        ZSTD_CCtx_reset(compressor, ZSTD_reset_session_only);
        ZSTD_CCtx_setPledgedSrcSize(compressor, length);
        ZSTD_outBuffer out = {stored + at, ZSTD_compressBound(length), 0};
        for (size_t block = 0; block < length; block += blockSize) {
            size_t blockLength = length - block < blockSize ? length - block : blockSize;
            ZSTD_inBuffer in = {from + block, blockLength, 0};
            ZSTD_EndDirective end = block + blockLength == length ? ZSTD_e_end : ZSTD_e_flush;
            size_t left = ZSTD_compressStream2(compressor, &out, &in, end);
            if (ZSTD_isError(left) || left != 0) fail("compress a block", ZSTD_isError(left) ? left : 0);
        }
        at += out.pos;
    }
    frameStart[chunkCount] = at;
    printf("chunk %zu, block %zu: %zu bytes stored of %zu (%.4f)\n", chunkSize, blockSize, at, sourceLength,
           (double)at / (double)sourceLength);
}

__attribute__((noinline)) static void phase_inflate(void) {
    for (size_t chunk = 0; chunk < chunkCount; chunk++) {
        size_t got = ZSTD_decompressDCtx(decompressor, plain, chunkSize, stored + frameStart[chunk],
                                         frameStart[chunk + 1] - frameStart[chunk]);
        if (ZSTD_isError(got) || got != chunkLength(chunk)) fail("inflate", ZSTD_isError(got) ? got : 0);
    }
}

__attribute__((noinline)) static void phase_partial(size_t reads) {
    size_t inflated = 0;
    srand(7);
    for (size_t read = 0; read < reads; read++) {
        size_t chunk = (size_t)rand() % chunkCount, length = chunkLength(chunk);
        size_t pages = length / 4096 ? length / 4096 : 1;
        size_t offset = ((size_t)rand() % pages) * 4096, end = offset + 4096 < length ? offset + 4096 : length;
        const unsigned char *next = stored + frameStart[chunk];
        size_t produced = 0;
        size_t begun = dictionaryForReads ? ZSTD_decompressBegin_usingDDict(decompressor, dictionaryForReads)
                                          : ZSTD_decompressBegin(decompressor);
        if (ZSTD_isError(begun)) fail("begin a frame", begun);
        while (produced < end) {
            size_t want = ZSTD_nextSrcSizeToDecompress(decompressor);
            if (want == 0) break;
            size_t got = ZSTD_decompressContinue(decompressor, plain + produced, chunkSize - produced, next, want);
            if (ZSTD_isError(got)) fail("inflate part", got);
            next += want;
            produced += got;
        }
        if (produced < end || memcmp(plain + offset, source + chunk * chunkSize + offset, end - offset) != 0) {
            fail("a partial read returned the wrong bytes", 0);
        }
        inflated += produced;
    }
    printf("partial reads inflated %zu bytes on average\n", inflated / reads);
}

static void useDictionary(size_t dictionarySize) {
    size_t samples = 0, sampleBytes = 0;
    size_t *sampleSizes = malloc(chunkCount * sizeof *sampleSizes);
    unsigned char *sampleData = malloc(sourceLength), *dictionary = malloc(dictionarySize);
    if (!sampleSizes || !sampleData || !dictionary) fail("out of memory", 0);
    for (size_t chunk = 0; chunk < chunkCount; chunk += 16) {
        memcpy(sampleData + sampleBytes, source + chunk * chunkSize, chunkLength(chunk));
        sampleSizes[samples++] = chunkLength(chunk);
        sampleBytes += chunkLength(chunk);
    }
    ZDICT_fastCover_params_t parameters;
    memset(&parameters, 0, sizeof parameters);
    parameters.k = 1024;
    parameters.d = 8;
    parameters.f = 20;
    parameters.accel = 1;
    parameters.zParams.compressionLevel = 3;
    size_t size = ZDICT_trainFromBuffer_fastCover(dictionary, dictionarySize, sampleData, sampleSizes,
                                                  (unsigned)samples, parameters);
    if (ZDICT_isError(size)) fail("train a dictionary", 0);
    printf("dictionary of %zu bytes from %zu samples\n", size, samples);
    ZSTD_CDict *cdict = ZSTD_createCDict(dictionary, size, 3);
    ZSTD_DDict *ddict = ZSTD_createDDict(dictionary, size);
    if (!cdict || !ddict) fail("load the dictionary", 0);
    ZSTD_CCtx_refCDict(compressor, cdict);
    ZSTD_CCtx_setParameter(compressor, ZSTD_c_forceAttachDict, ZSTD_dictForceAttach);
    ZSTD_DCtx_refDDict(decompressor, ddict);
    dictionaryForReads = ddict;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: zstd_frames FILE CHUNK BLOCK [LIMIT [DICT]]\n");
        return 2;
    }
    chunkSize = strtoul(argv[2], NULL, 10);
    blockSize = strtoul(argv[3], NULL, 10);
    size_t limit = argc > 4 ? strtoul(argv[4], NULL, 10) : 0, dictionarySize = argc > 5 ? strtoul(argv[5], NULL, 10) : 0;
    if (chunkSize < 4096 || blockSize == 0) fail("CHUNK must be at least 4096 and BLOCK more than 0", 0);
    FILE *file = fopen(argv[1], "rb");
    if (!file) fail("cannot open FILE", 0);
    fseek(file, 0, SEEK_END);
    sourceLength = (size_t)ftell(file);
    fseek(file, 0, SEEK_SET);
    if (limit && limit < sourceLength) sourceLength = limit;
    source = malloc(sourceLength);
    if (!source || fread(source, 1, sourceLength, file) != sourceLength) fail("cannot read FILE", 0);
    fclose(file);
    chunkCount = (sourceLength + chunkSize - 1) / chunkSize;
    stored = malloc(chunkCount * ZSTD_compressBound(chunkSize));
    frameStart = malloc((chunkCount + 1) * sizeof *frameStart);
    plain = malloc(chunkSize);
    compressor = ZSTD_createCCtx();
    decompressor = ZSTD_createDCtx();
    if (!stored || !frameStart || !plain || !compressor || !decompressor) fail("out of memory", 0);
    ZSTD_CCtx_setParameter(compressor, ZSTD_c_compressionLevel, 3);
    ZSTD_CCtx_setParameter(compressor, ZSTD_c_checksumFlag, 0);
    ZSTD_CCtx_setParameter(compressor, ZSTD_c_contentSizeFlag, 1);
    if (dictionarySize) useDictionary(dictionarySize);
    phase_compress();
    phase_inflate();
    phase_partial(1000);
    return 0;
}
