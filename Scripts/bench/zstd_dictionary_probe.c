// zstd_dictionary_probe: what a per-bundle trained zstd dictionary would save
// on a tree, before anyone builds it into the format (issue 31).
//
// It lays a tree out the way encfs-pack's defaults do (files of a whole chunk
// and more in 64 KiB chunks, the last partial chunk included; smaller files
// concatenated in list order into 256 KiB fragment units; whole files deduped
// by content), compresses every piece once without and once with a dictionary
// trained on slices of the same pieces, and prints both totals, each piece
// costing its frame plus a 16-byte tag (stored raw if zstd does not shrink it),
// the dictionary's own bytes counted against the gain, and the training and
// compression times (one thread). Index and header bytes are left out: they
// are the same on both sides.
//
// Build: cc -O2 -o probe Scripts/bench/zstd_dictionary_probe.c -lzstd
// Use:   find TREE -type f | sort > LIST
//        probe LIST [DICT_BYTES [SAMPLE_BYTES [LEVEL [UNIT_BYTES]]]]
// Defaults: 112640 (zstd --train's 110 KB), 4000000, 9, 262144.
// A measurement tool, not part of encfs: it holds the whole tree in memory.
#define ZDICT_STATIC_LINKING_ONLY
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zdict.h>
#include <zstd.h>

enum { chunkBytes = 65536, sliceBytes = 8192, tagBytes = 16 };

typedef struct { unsigned char *bytes; size_t count; int fragment; } Piece;

static Piece *pieces;
static size_t pieceCount, pieceCapacity;
static uint64_t *seen;
static size_t seenCount, seenCapacity;

static void *mustAlloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) { fprintf(stderr, "probe: out of memory\n"); exit(1); }
    return p;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void addPiece(unsigned char *bytes, size_t count, int fragment) {
    if (pieceCount == pieceCapacity) {
        pieceCapacity = pieceCapacity ? pieceCapacity * 2 : 1024;
        pieces = realloc(pieces, pieceCapacity * sizeof *pieces);
        if (!pieces) { fprintf(stderr, "probe: out of memory\n"); exit(1); }
    }
    pieces[pieceCount++] = (Piece){ bytes, count, fragment };
}

// Whole-file dedupe by a 64-bit FNV-1a of size and content, in an open
// addressing set (0 is the empty slot): close enough to encfs-pack's
// content-hash dedupe for a size estimate.
static int alreadySeen(uint64_t hash) {
    if (hash == 0) hash = 1;
    if (seenCount * 2 >= seenCapacity) {
        size_t oldCapacity = seenCapacity;
        uint64_t *old = seen;
        seenCapacity = seenCapacity ? seenCapacity * 2 : 1 << 16;
        seen = calloc(seenCapacity, sizeof *seen);
        if (!seen) { fprintf(stderr, "probe: out of memory\n"); exit(1); }
        for (size_t i = 0; i < oldCapacity; i++) {
            if (!old[i]) continue;
            size_t j = old[i] % seenCapacity;
            while (seen[j]) j = (j + 1) % seenCapacity;
            seen[j] = old[i];
        }
        free(old);
    }
    size_t j = hash % seenCapacity;
    while (seen[j]) {
        if (seen[j] == hash) return 1;
        j = (j + 1) % seenCapacity;
    }
    seen[j] = hash;
    seenCount++;
    return 0;
}

static void readTree(FILE *list, size_t unitBytes) {
    char path[8192];
    unsigned char *unit = mustAlloc(unitBytes);
    size_t unitFill = 0;
    while (fgets(path, sizeof path, list)) {
        path[strcspn(path, "\n")] = 0;
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        fseek(f, 0, SEEK_SET);
        unsigned char *bytes = size > 0 ? mustAlloc((size_t)size) : NULL;
        if (size <= 0 || fread(bytes, 1, (size_t)size, f) != (size_t)size) { fclose(f); free(bytes); continue; }
        fclose(f);
        uint64_t hash = 1469598103934665603ULL ^ (uint64_t)size;
        for (long i = 0; i < size; i++) { hash ^= bytes[i]; hash *= 1099511628211ULL; }
        if (alreadySeen(hash)) { free(bytes); continue; }
        if (size >= chunkBytes) {
            for (long offset = 0; offset < size; offset += chunkBytes)
                addPiece(bytes + offset, (size_t)(size - offset < chunkBytes ? size - offset : chunkBytes), 0);
            continue;
        }
        if (unitFill + (size_t)size > unitBytes) {
            addPiece(unit, unitFill, 1);
            unit = mustAlloc(unitBytes);
            unitFill = 0;
        }
        memcpy(unit + unitFill, bytes, (size_t)size);
        unitFill += (size_t)size;
        free(bytes);
    }
    if (unitFill) addPiece(unit, unitFill, 1);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: probe LIST [DICT_BYTES [SAMPLE_BYTES [LEVEL [UNIT_BYTES]]]]\n"); return 2; }
    FILE *list = fopen(argv[1], "r");
    if (!list) { fprintf(stderr, "probe: cannot open %s\n", argv[1]); return 1; }
    size_t dictCapacity = argc > 2 ? strtoul(argv[2], NULL, 10) : 112640;
    size_t sampleBudget = argc > 3 ? strtoul(argv[3], NULL, 10) : 4000000;
    int level = argc > 4 ? atoi(argv[4]) : 9;
    size_t unitBytes = argc > 5 ? strtoul(argv[5], NULL, 10) : 262144;
    readTree(list, unitBytes);

    // Samples: 8 KiB slices spread evenly over all pieces, up to the budget.
    size_t total = 0;
    for (size_t i = 0; i < pieceCount; i++) total += pieces[i].count;
    size_t stride = sampleBudget ? (total / sampleBudget + 1) * sliceBytes : total + 1;
    unsigned char *samples = mustAlloc(sampleBudget + sliceBytes);
    // A slice can be shorter than 8 KiB (a piece's end), so the count has a
    // bound of its own.
    size_t sampleLimit = sampleBudget / sliceBytes + 1;
    size_t *sampleSizes = mustAlloc(sampleLimit * sizeof *sampleSizes);
    size_t sampleFill = 0, position = 0;
    unsigned sampleCount = 0;
    for (size_t i = 0; i < pieceCount && sampleFill + sliceBytes <= sampleBudget && sampleCount < sampleLimit; i++) {
        for (size_t offset = 0; offset < pieces[i].count && sampleFill + sliceBytes <= sampleBudget && sampleCount < sampleLimit; offset += sliceBytes, position += sliceBytes) {
            if (position % stride) continue;
            size_t n = pieces[i].count - offset < sliceBytes ? pieces[i].count - offset : sliceBytes;
            memcpy(samples + sampleFill, pieces[i].bytes + offset, n);
            sampleSizes[sampleCount++] = n;
            sampleFill += n;
        }
    }

    // Training as ZDICT_trainFromBuffer does it (fastCover, d=8, 4 steps over k).
    double trainStart = now();
    unsigned char *dictionary = mustAlloc(dictCapacity);
    size_t dictionaryBytes = 0;
    if (dictCapacity) {
        ZDICT_fastCover_params_t parameters;
        memset(&parameters, 0, sizeof parameters);
        parameters.d = 8;
        parameters.steps = 4;
        parameters.nbThreads = 1;
        parameters.zParams.compressionLevel = level;
        dictionaryBytes = ZDICT_optimizeTrainFromBuffer_fastCover(dictionary, dictCapacity, samples, sampleSizes, sampleCount, &parameters);
        if (ZDICT_isError(dictionaryBytes)) {
            fprintf(stderr, "probe: training failed: %s\n", ZDICT_getErrorName(dictionaryBytes));
            dictionaryBytes = 0;
        }
    }
    double trainSeconds = now() - trainStart;

    ZSTD_CCtx *context = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 0);
    ZSTD_CDict *cdict = dictionaryBytes ? ZSTD_createCDict(dictionary, dictionaryBytes, level) : NULL;
    size_t bound = ZSTD_compressBound(unitBytes > chunkBytes ? unitBytes : chunkBytes);
    unsigned char *out = mustAlloc(bound);
    size_t raw[2] = { 0 }, plain[2] = { 0 }, withDictionary[2] = { 0 };
    double plainSeconds = 0, dictionarySeconds = 0;
    for (size_t i = 0; i < pieceCount; i++) {
        Piece p = pieces[i];
        raw[p.fragment] += p.count;
        double start = now();
        size_t n = ZSTD_compress2(context, out, bound, p.bytes, p.count);
        plainSeconds += now() - start;
        plain[p.fragment] += (ZSTD_isError(n) || n > p.count ? p.count : n) + tagBytes;
        if (!cdict) continue;
        start = now();
        n = ZSTD_compress_usingCDict(context, out, bound, p.bytes, p.count, cdict);
        dictionarySeconds += now() - start;
        withDictionary[p.fragment] += (ZSTD_isError(n) || n > p.count ? p.count : n) + tagBytes;
    }
    size_t plainTotal = plain[0] + plain[1];
    size_t dictionaryTotal = withDictionary[0] + withDictionary[1] + dictionaryBytes;
    printf("{\"pieces\": %zu, \"chunk_bytes_in\": %zu, \"unit_bytes_in\": %zu, "
           "\"plain\": {\"chunks\": %zu, \"units\": %zu, \"total\": %zu, \"seconds\": %.2f}, "
           "\"dictionary\": {\"bytes\": %zu, \"chunks\": %zu, \"units\": %zu, \"total_with_dictionary\": %zu, \"seconds\": %.2f, "
           "\"train_seconds\": %.2f, \"sample_bytes\": %zu, \"samples\": %u}, "
           "\"ratio\": {\"chunks\": %.3f, \"units\": %.3f, \"total\": %.4f}}\n",
           pieceCount, raw[0], raw[1], plain[0], plain[1], plainTotal, plainSeconds,
           dictionaryBytes, withDictionary[0], withDictionary[1], dictionaryTotal, dictionarySeconds,
           trainSeconds, sampleFill, sampleCount,
           plain[0] ? (double)withDictionary[0] / plain[0] : 0, plain[1] ? (double)withDictionary[1] / plain[1] : 0,
           plainTotal ? (double)dictionaryTotal / plainTotal : 0);
    return 0;
}
