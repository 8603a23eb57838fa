/* The .npy reader and writer: golden files, round trips, and malformed or
 * hostile inputs (every truncation, bit flips in the header, crafted
 * headers), which must give MLA_ERR_FORMAT / MLA_ERR_IO and never crash.
 * Usage: test_conformance_npy GOLDEN_DIR SCRATCH_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/npy.h"

static int passed, failed;

static void check(int ok, const char *what)
{
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL: %s\n", what);
    }
}

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *buf = malloc(1 << 20);
    *len = buf ? fread(buf, 1, 1 << 20, f) : 0;
    fclose(f);
    return buf;
}

static void golden(const char *dir)
{
    static const struct {
        const char *file;
        mla_npy_type type;
        int32_t ndim;
        int64_t d0, d1;
    } files[] = {
        {"fp8_inputs_f32.npy", MLA_NPY_F4, 1, 6051, 0},
        {"bf16_encode_u16.npy", MLA_NPY_U2, 1, 8051, 0},
        {"mxfp4_production_codes_u8.npy", MLA_NPY_U1, 2, 64, 128},
        {"indexer_k_e4m3fn_ue8m0_scales_f32.npy", MLA_NPY_F4, 1, 32, 0},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; ++i) {
        char path[1024], err[256];
        snprintf(path, sizeof path, "%s/%s", dir, files[i].file);
        mla_npy a;
        mla_status st = mla_npy_load(path, &a, err, sizeof err);
        check(st == MLA_OK && a.type == files[i].type && a.ndim == files[i].ndim &&
                  a.shape[0] == files[i].d0 && (a.ndim < 2 || a.shape[1] == files[i].d1),
              files[i].file);
        mla_npy_free(&a);
    }
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/no_such_file.npy", dir);
    mla_npy a;
    check(mla_npy_load(path, &a, err, sizeof err) == MLA_ERR_IO, "missing file -> MLA_ERR_IO");
}

static void round_trip(const char *scratch)
{
    static const int64_t shapes[][3] = {{0, 0, 0}, {5, 0, 0}, {2, 3, 4}, {0, 7, 0}};
    static const int32_t ndims[] = {0, 1, 3, 2};
    for (int t = 0; t < MLA_NPY_TYPE_COUNT; ++t)
        for (int s = 0; s < 4; ++s) {
            unsigned char data[24 * 8];
            for (size_t i = 0; i < sizeof data; ++i)
                data[i] = (unsigned char)(i * 37 + (size_t)t);
            char path[1024], err[256], what[128];
            snprintf(path, sizeof path, "%s/rt_%d_%d.npy", scratch, t, s);
            snprintf(what, sizeof what, "round trip %s ndim %d", mla_npy_type_descr((mla_npy_type)t),
                     (int)ndims[s]);
            mla_status st = mla_npy_save(path, (mla_npy_type)t, ndims[s], shapes[s], data, err,
                                         sizeof err);
            mla_npy a;
            st = st == MLA_OK ? mla_npy_load(path, &a, err, sizeof err) : st;
            int ok = st == MLA_OK && a.type == (mla_npy_type)t && a.ndim == ndims[s];
            for (int32_t d = 0; ok && d < a.ndim; ++d)
                ok = a.shape[d] == shapes[s][d];
            ok = ok && (a.nbytes == 0 || memcmp(a.data, data, a.nbytes) == 0);
            check(ok, what);
            if (st == MLA_OK)
                mla_npy_free(&a);
        }
}

/* A v1 file with the given dict and data size. */
static size_t craft(unsigned char *buf, const char *dict, size_t data)
{
    size_t n = strlen(dict);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)(n & 0xFF);
    buf[9] = (unsigned char)(n >> 8);
    memcpy(buf + 10, dict, n);
    memset(buf + 10 + n, 0xAB, data);
    return 10 + n + data;
}

static void hostile(void)
{
    static const struct {
        const char *dict;
        size_t data;
        const char *what;
    } bad[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 11, "truncated data"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 13, "trailing data"},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }", 12, "fortran order"},
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", 12, "big-endian"},
        {"{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", 8, "complex"},
        {"{'descr': '|u2', 'fortran_order': False, 'shape': (1,), }", 2, "| on 2 bytes"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", 12, "(3) is not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 0, "negative extent"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 0,
         "element count overflow"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }", 0,
         "byte size overflow"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 0,
         "extent overflow"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1), }",
         4, "17 dims"},
        {"{'descr': '<f4', 'fortran_order': False}", 4, "missing shape"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4, "extra key"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", 4,
         "repeated key"},
        {"{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}", 4, "bad quote"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} junk", 4, "text after dict"},
        {"{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", 4, "missing comma"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,", 4, "unterminated"},
        {"", 0, "empty header"},
        {"{'descr': 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 'fortran_order': False, 'shape': ()}",
         0, "long descr"},
    };
    static unsigned char buf[4096];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        size_t len = craft(buf, bad[i].dict, bad[i].data);
        mla_npy a;
        char err[256] = "";
        mla_status st = mla_npy_parse(buf, len, &a, err, sizeof err);
        check(st == MLA_ERR_FORMAT && err[0], bad[i].what);
        if (st == MLA_OK)
            mla_npy_free(&a);
    }
    /* Version 2 with a 4 GiB header length, and a bad version. */
    unsigned char v2[16] = "\x93NUMPY\x02\x00\xff\xff\xff\xff";
    mla_npy a;
    check(mla_npy_parse(v2, 12, &a, NULL, 0) == MLA_ERR_FORMAT, "v2 huge header length");
    unsigned char v9[16] = "\x93NUMPY\x09\x00\x10\x00";
    check(mla_npy_parse(v9, 10, &a, NULL, 0) == MLA_ERR_FORMAT, "version 9");
    check(mla_npy_parse("\x93NUM", 4, &a, NULL, 0) == MLA_ERR_FORMAT, "4 bytes");
}

/* Every prefix of a real file, and random byte flips in its header. */
static void mutate(const char *dir, const char *scratch)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/e2m1_decode_all_codes_f32.npy", dir);
    size_t len = 0;
    unsigned char *buf = read_all(path, &len);
    check(buf && len > 128, "read e2m1 golden");
    if (!buf)
        return;
    int prefixes_ok = 1, flips_ok = 1;
    for (size_t n = 0; n < len; ++n) {
        mla_npy a;
        prefixes_ok &= mla_npy_parse(buf, n, &a, NULL, 0) == MLA_ERR_FORMAT;
    }
    check(prefixes_ok, "every truncation -> MLA_ERR_FORMAT");
    /* The same through a file: truncated at the header, and inside the data. */
    size_t cuts[] = {9, 60, len - 1};
    for (size_t c = 0; c < 3; ++c) {
        snprintf(path, sizeof path, "%s/cut_%zu.npy", scratch, c);
        FILE *f = fopen(path, "wb");
        if (f) {
            fwrite(buf, 1, cuts[c], f);
            fclose(f);
        }
        mla_npy a;
        prefixes_ok &= mla_npy_load(path, &a, NULL, 0) == MLA_ERR_FORMAT;
    }
    check(prefixes_ok, "truncated files -> MLA_ERR_FORMAT");
    uint64_t x = 0x1234567u;
    for (int i = 0; i < 20000; ++i) {
        unsigned char m[512];
        memcpy(m, buf, len);
        for (int k = 0; k < 3; ++k) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            m[(x >> 33) % 128] ^= (unsigned char)(1u << ((x >> 20) & 7));
        }
        mla_npy a;
        mla_status st = mla_npy_parse(m, len, &a, NULL, 0);
        flips_ok &= st == MLA_OK || st == MLA_ERR_FORMAT;
        if (st == MLA_OK)
            mla_npy_free(&a);
    }
    check(flips_ok, "header bit flips -> OK or MLA_ERR_FORMAT");
    free(buf);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s GOLDEN_DIR SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    golden(argv[1]);
    round_trip(argv[2]);
    hostile();
    mutate(argv[1], argv[2]);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
