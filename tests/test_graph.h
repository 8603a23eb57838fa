/* Capturing library calls in a HIP/CUDA graph, for the tests of the calls
 * that promise to be capturable. The capture uses the thread-local mode, in
 * which the runtime refuses the calls that may allocate or synchronize, so
 * a call that does either fails the capture instead of passing silently. */
#ifndef MLA_TEST_GRAPH_H
#define MLA_TEST_GRAPH_H

#include <stdio.h>
#include <stdlib.h>

#if MLA_TEST_CUDA
#include <cuda_runtime_api.h>
#define GPU(name) cuda##name
#define gpu_instantiate(exec, graph) cudaGraphInstantiate(exec, graph, 0)
#else
#include <hip/hip_runtime_api.h>
#define GPU(name) hip##name
#define gpu_instantiate(exec, graph) hipGraphInstantiate(exec, graph, NULL, NULL, 0)
#endif

#include "mla/mla.h"
#include "tests/test_util.h"

/* A HIP context on a stream of its own (what a capture records): 77 when
 * no GPU answers (the test skips), 1 when a step failed (checked), else 0
 * with *ctx and *stream made; the caller destroys both. */
static inline int test_graph_context(const char *test, GPU(Stream_t) * stream, mla_context **ctx)
{
    mla_context *probe = NULL;
    if (mla_context_create(MLA_BACKEND_HIP, NULL, &probe) != MLA_OK) {
        printf("%s: no HIP device, skipped\n", test);
        return 77;
    }
    mla_context_destroy(probe);
    *stream = NULL;
    *ctx = NULL;
    const GPU(Error_t) made = GPU(StreamCreate)(stream);
    CHECK(made == GPU(Success));
    if (made != GPU(Success))
        return 1;
    const mla_context_options opt = {.device = 0, .stream = (void *)*stream};
    CHECK_STATUS(mla_context_create(MLA_BACKEND_HIP, &opt, ctx), MLA_OK);
    if (!*ctx) {
        (void)GPU(StreamDestroy)(*stream);
        return 1;
    }
    return 0;
}

/* Starts capturing the stream; 0 when the runtime refused. */
static inline int test_capture_begin(GPU(Stream_t) stream)
{
    const GPU(Error_t) begun = GPU(StreamBeginCapture)(stream, GPU(StreamCaptureModeThreadLocal));
    CHECK(begun == GPU(Success));
    return begun == GPU(Success);
}

/* Ends the capture, checks that it recorded at least min_kernels kernels
 * (work sent to another stream would leave them out) and instantiates it;
 * *exec stays NULL when any step failed. */
static inline void test_capture_end(GPU(Stream_t) stream, size_t min_kernels, GPU(Graph_t) * graph,
                                    GPU(GraphExec_t) * exec)
{
    *graph = NULL;
    *exec = NULL;
    const GPU(Error_t) ended = GPU(StreamEndCapture)(stream, graph);
    CHECK(ended == GPU(Success) && *graph);
    if (ended != GPU(Success) || !*graph) {
        if (*graph)
            (void)GPU(GraphDestroy)(*graph);
        *graph = NULL;
        (void)GPU(GetLastError)();
        return;
    }
    size_t n = 0, kernels = 0;
    CHECK(GPU(GraphGetNodes)(*graph, NULL, &n) == GPU(Success));
    GPU(GraphNode_t) *nodes = calloc(n ? n : 1, sizeof *nodes);
    if (nodes && GPU(GraphGetNodes)(*graph, nodes, &n) == GPU(Success))
        for (size_t i = 0; i < n; ++i) {
            enum GPU(GraphNodeType) type;
            if (GPU(GraphNodeGetType)(nodes[i], &type) == GPU(Success) &&
                type == GPU(GraphNodeTypeKernel))
                ++kernels;
        }
    free(nodes);
    CHECK(kernels >= min_kernels);
    CHECK(gpu_instantiate(exec, *graph) == GPU(Success) && *exec);
}

/* Destroys what test_capture_end made (either may be NULL). */
static inline void test_graph_destroy(GPU(Graph_t) graph, GPU(GraphExec_t) exec)
{
    if (exec)
        CHECK(GPU(GraphExecDestroy)(exec) == GPU(Success));
    if (graph)
        CHECK(GPU(GraphDestroy)(graph) == GPU(Success));
}

#endif
