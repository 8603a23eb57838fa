/* The device matmul ceiling (ceilings.h): the vendor BLAS measured in the
 * same run, else the device's theoretical peak from its attributes.
 *
 * Nothing here links to a vendor library: cuBLAS / rocBLAS and the runtime
 * or driver calls for the events are looked up with dlopen / dlsym when the
 * benchmark runs, through the few prototypes declared below (their
 * documented C signatures; the enum values are the documented constants).
 * The GEMM is C = A B, square n x n, bf16 A, B and C, fp32 accumulation,
 * n = 4096, 8192, 16384 (as memory allows), timed by device events around
 * a batch of calls on the default stream; the best median rate is the
 * ceiling.
 *
 * The libraries are searched in this order: $MLA_BENCH_BLAS (a full path),
 * the plain sonames (LD_LIBRARY_PATH, the loader's cache), the CUDA / ROCm
 * install directories, then the pip wheels of a Python environment
 * (nvidia-cublas-* under site-packages / dist-packages, as PyTorch installs
 * them). bench/run_gpu.sh sets MLA_BENCH_BLAS from the job's python3.
 *
 * Theoretical peak, dense bf16 with fp32 accumulation:
 *   NVIDIA  SMs x SM clock (CU_DEVICE_ATTRIBUTE_CLOCK_RATE, the boost clock)
 *           x FLOP per SM per cycle: sm_80 2048, sm_86 / 87 / 89 1024,
 *           sm_90 4096, sm_100 8192 (the vendors' dense bf16 figures over
 *           SMs x boost clock: A100 312 T, A40 150 T, H100 989 T, B200 2250 T)
 *   AMD     CUs x the top compute clock (KFD topology: simd_count /
 *           simd_per_cu, max_engine_clk_fcompute) x FLOP per CU per cycle:
 *           gfx90a 1024, gfx942 2048, gfx950 4096 (MI250X 383 T, MI300X
 *           1307 T, MI355X 2517 T). */
#define _GNU_SOURCE /* dladdr */

#include <dlfcn.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include "bench/ceilings.h"

static const int64_t vendor_n[] = {4096, 8192, 16384};
#define N_VENDOR ((int)(sizeof vendor_n / sizeof vendor_n[0]))
#define VENDOR_BATCH 3 /* GEMMs per timed sample */

/* ------------------------------------------------------ library search */

/* dlopen of the first name or glob pattern that loads; *path gets it. */
static void *open_first(const char *const *names, int n, char *path, size_t len)
{
    const char *env = getenv("MLA_BENCH_BLAS");
    for (int i = -1; i < n; ++i) {
        const char *name = i < 0 ? env : names[i];
        if (!name || !*name)
            continue;
        if (!strchr(name, '*')) {
            void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
            if (h) {
                snprintf(path, len, "%s", name);
                return h;
            }
            continue;
        }
        glob_t g;
        if (glob(name, 0, NULL, &g) == 0) {
            for (size_t k = 0; k < g.gl_pathc; ++k) {
                void *h = dlopen(g.gl_pathv[k], RTLD_NOW | RTLD_LOCAL);
                if (h) {
                    snprintf(path, len, "%s", g.gl_pathv[k]);
                    globfree(&g);
                    return h;
                }
            }
            globfree(&g);
        }
    }
    return NULL;
}

static const char *const cublas_names[] = {
    "libcublas.so.13",
    "libcublas.so.12",
    "libcublas.so",
    "/usr/local/cuda/lib64/libcublas.so.*",
    "/usr/local/cuda/targets/*/lib/libcublas.so.*",
    "/opt/*/.venv/lib/python3*/site-packages/nvidia/cu*/lib/libcublas.so.*",
    "/opt/*/.venv/lib/python3*/site-packages/nvidia/cublas/lib/libcublas.so.*",
    "/usr/local/lib/python3*/*-packages/nvidia/cu*/lib/libcublas.so.*",
    "/usr/local/lib/python3*/*-packages/nvidia/cublas/lib/libcublas.so.*",
    "/usr/lib/python3/dist-packages/nvidia/cu*/lib/libcublas.so.*",
    "/usr/lib/python3/dist-packages/nvidia/cublas/lib/libcublas.so.*",
};

static const char *const rocblas_names[] = {
    "librocblas.so.5",
    "librocblas.so.4",
    "librocblas.so",
    "/opt/rocm/lib/librocblas.so.*",
    "/opt/rocm-*/lib/librocblas.so.*",
};

static const char *const hip_names[] = {
    "libamdhip64.so.7",
    "libamdhip64.so.6",
    "libamdhip64.so",
    "/opt/rocm/lib/libamdhip64.so.*",
};

/* ------------------------------------------------ the vendor interfaces */

/* cuBLAS / CUDA driver constants (cublas_api.h, library_types.h, cuda.h). */
enum {
    CUBLAS_OP_N_ = 0,
    CUDA_R_16BF_ = 14,
    CUBLAS_COMPUTE_32F_ = 68,
    CUBLAS_GEMM_DEFAULT_ = -1,
    CU_ATTR_CLOCK_RATE_ = 13,
    CU_ATTR_SM_COUNT_ = 16,
    CU_ATTR_CC_MAJOR_ = 75,
    CU_ATTR_CC_MINOR_ = 76,
};
/* rocBLAS constants (rocblas-types.h). */
enum {
    ROCBLAS_OP_NONE_ = 111,
    ROCBLAS_F32_ = 151,
    ROCBLAS_BF16_ = 168,
    ROCBLAS_ALGO_STANDARD_ = 0,
};

/* The entry points used, by their documented C signatures. */
typedef int (*cublas_create_fn)(void **handle);
typedef int (*cublas_destroy_fn)(void *handle);
typedef int (*cublas_version_fn)(void *handle, int *version);
typedef int (*cublas_gemm_ex_fn)(void *handle, int transa, int transb, int m, int n, int k,
                                 const void *alpha, const void *A, int Atype, int lda,
                                 const void *B, int Btype, int ldb, const void *beta, void *C,
                                 int Ctype, int ldc, int compute, int algo);
typedef int (*rocblas_gemm_ex_fn)(void *handle, int transa, int transb, int m, int n, int k,
                                  const void *alpha, const void *a, int a_type, int lda,
                                  const void *b, int b_type, int ldb, const void *beta,
                                  const void *c, int c_type, int ldc, void *d, int d_type, int ldd,
                                  int compute_type, int algo, int32_t solution_index,
                                  uint32_t flags);
typedef int (*cu_event_create_fn)(void **event, unsigned flags);
typedef int (*hip_event_create_fn)(void **event);
typedef int (*event_record_fn)(void *event, void *stream);
typedef int (*event_fn)(void *event);
typedef int (*event_ms_fn)(float *ms, void *start, void *end);

/* One vendor's GEMM and its runtime's events. */
typedef struct vendor {
    int nvidia;       /* 1: cuBLAS + the CUDA driver; 0: rocBLAS + the HIP runtime */
    const char *name; /* "cuBLAS" / "rocBLAS" */
    char path[512];
    void *lib, *rt, *handle;
    cublas_create_fn create;   /* cublasCreate_v2 / rocblas_create_handle */
    cublas_destroy_fn destroy; /* cublasDestroy_v2 / rocblas_destroy_handle */
    cublas_version_fn version; /* cublasGetVersion_v2, NULL on ROCm */
    cublas_gemm_ex_fn cu_gemm;
    rocblas_gemm_ex_fn roc_gemm;
    cu_event_create_fn cu_ev_create;
    hip_event_create_fn hip_ev_create;
    event_record_fn ev_record;
    event_fn ev_sync, ev_destroy;
    event_ms_fn ev_ms;
} vendor;

#define SYM(lib, dst, name) (*(void **)&(dst) = dlsym((lib), (name)))

static int v_gemm(const vendor *v, int64_t n, const void *a, const void *b, void *c)
{
    const float one = 1.0f, zero = 0.0f;
    const int m = (int)n;
    if (v->nvidia)
        return v->cu_gemm(v->handle, CUBLAS_OP_N_, CUBLAS_OP_N_, m, m, m, &one, a, CUDA_R_16BF_, m,
                          b, CUDA_R_16BF_, m, &zero, c, CUDA_R_16BF_, m, CUBLAS_COMPUTE_32F_,
                          CUBLAS_GEMM_DEFAULT_);
    return v->roc_gemm(v->handle, ROCBLAS_OP_NONE_, ROCBLAS_OP_NONE_, m, m, m, &one, a,
                       ROCBLAS_BF16_, m, b, ROCBLAS_BF16_, m, &zero, c, ROCBLAS_BF16_, m, c,
                       ROCBLAS_BF16_, m, ROCBLAS_F32_, ROCBLAS_ALGO_STANDARD_, 0, 0);
}

static int v_event(const vendor *v, void **e)
{
    return v->nvidia ? v->cu_ev_create(e, 0) : v->hip_ev_create(e);
}

/* Loads the vendor BLAS and its runtime's event calls and creates a handle:
 * 0, or -1 with the reason in why. */
static int open_vendor(vendor *v, int nvidia, char *why, size_t len)
{
    v->nvidia = nvidia;
    v->name = nvidia ? "cuBLAS" : "rocBLAS";
    v->lib = nvidia ? open_first(cublas_names, (int)(sizeof cublas_names / sizeof *cublas_names),
                                 v->path, sizeof v->path)
                    : open_first(rocblas_names, (int)(sizeof rocblas_names / sizeof *rocblas_names),
                                 v->path, sizeof v->path);
    if (!v->lib) {
        snprintf(why, len, "no %s library found (MLA_BENCH_BLAS, sonames, %s)", v->name,
                 nvidia ? "/usr/local/cuda, python site-packages" : "/opt/rocm");
        return -1;
    }
    char rt_path[512];
    v->rt = nvidia ? dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)
                   : open_first(hip_names, (int)(sizeof hip_names / sizeof *hip_names), rt_path,
                                sizeof rt_path);
    if (!v->rt) {
        snprintf(why, len, "%s not loadable", nvidia ? "libcuda.so.1" : "libamdhip64");
        return -1;
    }
    if (nvidia) {
        SYM(v->lib, v->create, "cublasCreate_v2");
        SYM(v->lib, v->destroy, "cublasDestroy_v2");
        SYM(v->lib, v->version, "cublasGetVersion_v2");
        SYM(v->lib, v->cu_gemm, "cublasGemmEx");
        SYM(v->rt, v->cu_ev_create, "cuEventCreate");
        SYM(v->rt, v->ev_record, "cuEventRecord");
        SYM(v->rt, v->ev_sync, "cuEventSynchronize");
        if (!SYM(v->rt, v->ev_ms, "cuEventElapsedTime_v2"))
            SYM(v->rt, v->ev_ms, "cuEventElapsedTime");
        SYM(v->rt, v->ev_destroy, "cuEventDestroy_v2");
    } else {
        SYM(v->lib, v->create, "rocblas_create_handle");
        SYM(v->lib, v->destroy, "rocblas_destroy_handle");
        SYM(v->lib, v->roc_gemm, "rocblas_gemm_ex");
        SYM(v->rt, v->hip_ev_create, "hipEventCreate");
        SYM(v->rt, v->ev_record, "hipEventRecord");
        SYM(v->rt, v->ev_sync, "hipEventSynchronize");
        SYM(v->rt, v->ev_ms, "hipEventElapsedTime");
        SYM(v->rt, v->ev_destroy, "hipEventDestroy");
    }
    if (!v->create || !v->destroy || !(v->cu_gemm || v->roc_gemm) ||
        !(v->cu_ev_create || v->hip_ev_create) || !v->ev_record || !v->ev_sync || !v->ev_ms ||
        !v->ev_destroy) {
        snprintf(why, len, "%.200s or its runtime lacks a needed symbol", v->path);
        return -1;
    }
    Dl_info info; /* the file the loader really took */
    if (dladdr(*(void **)&v->create, &info) && info.dli_fname)
        snprintf(v->path, sizeof v->path, "%s", info.dli_fname);
    const int st = v->create(&v->handle);
    if (st != 0) {
        v->handle = NULL;
        snprintf(why, len, "creating a %s handle failed (status %d) with %.160s", v->name, st,
                 v->path);
        return -1;
    }
    return 0;
}

/* The libraries stay loaded: unloading cuBLAS or the HIP runtime while the
 * process keeps using the device is not worth the risk. */
static void close_vendor(vendor *v)
{
    if (v->handle)
        (void)v->destroy(v->handle);
    v->handle = NULL;
}

static int is_nvidia(void)
{
    const mla_build_info *bi = mla_build_info_get();
    return bi->hip_platform && !strcmp(bi->hip_platform, "nvidia");
}

/* ------------------------------------------------------------ measuring */

/* Median seconds per GEMM of size n, or a negative value (with why) on failure. */
static double time_gemm(const vendor *v, int64_t n, const void *a, const void *b, void *c, int reps,
                        char *why, size_t len)
{
    void *e0 = NULL, *e1 = NULL;
    double t[16], med = -1.0;
    reps = reps < 1 ? 1 : reps > 16 ? 16 : reps;
    if (v_event(v, &e0) || v_event(v, &e1)) {
        snprintf(why, len, "event creation failed");
        goto out;
    }
    for (int w = 0; w < 2; ++w) { /* warm-up: the library picks and loads its kernel */
        const int st = v_gemm(v, n, a, b, c);
        if (st != 0) {
            snprintf(why, len, "%s GEMM n=%lld failed (status %d)", v->name, (long long)n, st);
            goto out;
        }
    }
    for (int i = 0; i < reps; ++i) {
        float ms = 0.0f;
        int st = v->ev_record(e0, NULL);
        for (int k = 0; k < VENDOR_BATCH && st == 0; ++k)
            st = v_gemm(v, n, a, b, c);
        if (st == 0)
            st = v->ev_record(e1, NULL);
        if (st == 0)
            st = v->ev_sync(e1);
        if (st == 0)
            st = v->ev_ms(&ms, e0, e1);
        if (st != 0) {
            snprintf(why, len, "%s GEMM / event timing failed (status %d)", v->name, st);
            goto out;
        }
        t[i] = (double)ms * 1e-3 / VENDOR_BATCH;
    }
    med = bench_median(t, reps);
out:
    if (e0)
        (void)v->ev_destroy(e0);
    if (e1)
        (void)v->ev_destroy(e1);
    return med;
}

int bench_vendor_gemm(mla_context *ctx, const bench_ceiling_options *o, bench_ceilings *c,
                      FILE *log)
{
    const int reps = o->reps > 0 ? (o->reps < 7 ? o->reps : 7) : 5;
    vendor v;
    memset(&v, 0, sizeof v);
    char why[256] = "";
    const int nv = is_nvidia();
    if (open_vendor(&v, nv, why, sizeof why) != 0) {
        snprintf(c->matmul_how, sizeof c->matmul_how, "vendor BLAS not measured: %.200s", why);
        close_vendor(&v);
        return -1;
    }
    int version = 0;
    if (v.version)
        (void)v.version(v.handle, &version);
    double best = 0.0, prev_s = 0.0;
    int64_t best_n = 0;
    for (int i = 0; i < N_VENDOR; ++i) {
        const int64_t n = vendor_n[i], bytes = n * n * 2;
        if (prev_s > 0.0 && 8.0 * prev_s > o->max_call_s) {
            if (log)
                fprintf(log, "ceiling %s : n=%lld skipped: predicted over --max-call-s\n", v.name,
                        (long long)n);
            break;
        }
        void *a = NULL, *b = NULL, *m = NULL;
        mla_status st = mla_malloc(ctx, (size_t)bytes, &a);
        if (st == MLA_OK)
            st = mla_malloc(ctx, (size_t)bytes, &b);
        if (st == MLA_OK)
            st = mla_malloc(ctx, (size_t)bytes, &m);
        if (st == MLA_OK)
            st = bench_fill_context(ctx, a, MLA_DTYPE_BF16, n * n, BENCH_FILL_ACT,
                                    0x5eed0020u + (uint64_t)i);
        if (st == MLA_OK)
            st = bench_fill_context(ctx, b, MLA_DTYPE_BF16, n * n, BENCH_FILL_ACT,
                                    0x5eed0030u + (uint64_t)i);
        if (st == MLA_OK)
            st = mla_context_synchronize(ctx);
        double s = -1.0;
        if (st == MLA_OK)
            s = time_gemm(&v, n, a, b, m, reps, why, sizeof why);
        else
            snprintf(why, sizeof why, "n=%lld: mla_malloc / fill: %s", (long long)n,
                     mla_status_name(st));
        if (a)
            mla_free(ctx, a);
        if (b)
            mla_free(ctx, b);
        if (m)
            mla_free(ctx, m);
        prev_s = s;
        if (s <= 0.0) {
            if (log)
                fprintf(log, "ceiling %s : n=%lld not measured: %s\n", v.name, (long long)n, why);
            continue;
        }
        bench_gemm_point *p = &c->mm[c->n_mm++];
        p->M = p->N = p->K = n;
        p->seconds = s;
        p->gflops = 2.0 * (double)n * (double)n * (double)n / s / 1e9;
        p->note = nv ? "cublasGemmEx bf16, fp32 accumulation"
                     : "rocblas_gemm_ex bf16, fp32 "
                       "accumulation";
        if (p->gflops > best)
            best = p->gflops, best_n = n;
        if (log)
            fprintf(log, "ceiling %s : n=%lld  %.1f GFLOP/s\n", v.name, (long long)n, p->gflops);
    }
    close_vendor(&v);
    if (best <= 0.0) {
        snprintf(c->matmul_how, sizeof c->matmul_how, "vendor BLAS not measured: %.200s", why);
        return -1;
    }
    c->matmul_gflops = best;
    c->matmul_source = BENCH_MM_VENDOR;
    char ver[16] = "";
    if (version > 0 && version < 1000000)
        snprintf(ver, sizeof ver, " %d", version);
    snprintf(c->matmul_how, sizeof c->matmul_how,
             "%s%s (%.80s, loaded at run time), bf16 -> bf16, fp32 accumulation, square "
             "n = 4096..16384, best n = %lld, device events around batches of %d",
             v.name, ver, v.path, (long long)best_n, VENDOR_BATCH);
    return 0;
}

/* ------------------------------------------------------ theoretical peak */

/* NVIDIA: the driver's attributes of the current context's device. */
static int nvidia_peak(double *gflops, char *how, size_t len)
{
    void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*get_dev)(int *) = NULL, (*attr)(int *, int, int) = NULL;
    if (cu) {
        SYM(cu, get_dev, "cuCtxGetDevice");
        SYM(cu, attr, "cuDeviceGetAttribute");
    }
    int dev = 0, sms = 0, khz = 0, major = 0, minor = 0;
    if (!get_dev || !attr) {
        snprintf(how, len, "not available: libcuda.so.1 not loadable");
        return -1;
    }
    if (get_dev(&dev) != 0)
        dev = 0;
    if (attr(&sms, CU_ATTR_SM_COUNT_, dev) || attr(&khz, CU_ATTR_CLOCK_RATE_, dev) ||
        attr(&major, CU_ATTR_CC_MAJOR_, dev) || attr(&minor, CU_ATTR_CC_MINOR_, dev) || sms <= 0 ||
        khz <= 0) {
        snprintf(how, len, "not available: cuDeviceGetAttribute failed");
        return -1;
    }
    const int cc = 10 * major + minor;
    const double per = cc == 80                             ? 2048
                       : (cc == 86 || cc == 87 || cc == 89) ? 1024
                       : major == 9                         ? 4096
                       : major == 10                        ? 8192
                                                            : 0;
    if (per <= 0) {
        snprintf(how, len, "not available: no per-SM bf16 rate known for sm_%d", cc);
        return -1;
    }
    *gflops = (double)sms * (double)khz * 1e3 * per / 1e9;
    snprintf(how, len,
             "THEORETICAL, not measured: %d SMs x %.0f MHz (boost) x %.0f bf16 FLOP per SM per "
             "cycle (sm_%d, dense)",
             sms, khz / 1e3, per, cc);
    return 0;
}

/* AMD: the KFD topology node of the context's architecture. */
static int amd_peak(const char *device_name, double *gflops, char *how, size_t len)
{
    const char *g = strstr(device_name, "gfx");
    char arch[16] = "";
    if (g)
        sscanf(g, "%15[a-z0-9]", arch);
    const double per = !strcmp(arch, "gfx90a")   ? 1024
                       : !strcmp(arch, "gfx942") ? 2048
                       : !strcmp(arch, "gfx950") ? 4096
                                                 : 0;
    if (per <= 0) {
        snprintf(how, len, "not available: no per-CU bf16 rate known for '%s'", arch);
        return -1;
    }
    long gv = 0;
    {
        int major = 0, minor = 0, step = 0;
        if (sscanf(arch, "gfx%1d%1d%x", &major, &minor, &step) == 3)
            gv = (long)major * 10000 + (long)minor * 100 + step;
    }
    for (int node = 0; node < 64; ++node) {
        char p[128];
        snprintf(p, sizeof p, "/sys/class/kfd/kfd/topology/nodes/%d/properties", node);
        FILE *f = fopen(p, "r");
        if (!f)
            continue;
        long simd = 0, per_cu = 0, mhz = 0, tv = 0;
        char key[64];
        long val;
        while (fscanf(f, "%63s %ld", key, &val) == 2) {
            if (!strcmp(key, "simd_count"))
                simd = val;
            else if (!strcmp(key, "simd_per_cu"))
                per_cu = val;
            else if (!strcmp(key, "max_engine_clk_fcompute"))
                mhz = val;
            else if (!strcmp(key, "gfx_target_version"))
                tv = val;
        }
        fclose(f);
        if (simd <= 0 || per_cu <= 0 || mhz <= 0 || (gv && tv != gv))
            continue;
        const long cus = simd / per_cu;
        *gflops = (double)cus * (double)mhz * 1e6 * per / 1e9;
        snprintf(how, len,
                 "THEORETICAL, not measured: %ld CUs x %ld MHz (top compute clock) x %.0f bf16 "
                 "FLOP per CU per cycle (%s, dense; KFD topology node %d)",
                 cus, mhz, per, arch, node);
        return 0;
    }
    snprintf(how, len, "not available: no KFD topology node for %s", arch);
    return -1;
}

int bench_device_peak(mla_context *ctx, bench_ceilings *c)
{
    const int st = is_nvidia() ? nvidia_peak(&c->peak_gflops, c->peak_how, sizeof c->peak_how)
                               : amd_peak(mla_context_device_name(ctx), &c->peak_gflops,
                                          c->peak_how, sizeof c->peak_how);
    if (st != 0)
        c->peak_gflops = 0.0;
    return st;
}
