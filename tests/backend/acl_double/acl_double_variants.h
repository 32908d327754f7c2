// TEST DOUBLE variants of the ACL runtime that LACK some symbols, to test npu_ge
// against a libascendcl.so of an older (or trimmed) CANN. dlsym finds every
// symbol a library exports, so a missing symbol cannot be switched by an
// environment variable at run time: each variant is the same double linked
// with a version script that keeps the listed symbols out of its dynamic
// symbol table. acl_double/CMakeLists.txt reads the table below (one X() per
// line, exactly this shape) and builds <build>/acl_double_<variant>/libascendcl.so
// for each entry; point tritonserver's LD_LIBRARY_PATH at that directory.
//
//   variant        symbols missing from it             what it stands for
//   no_telemetry   aclrtGetDeviceUtilizationRate,      a CANN before the utilization
//                  aclrtGetMemInfo                     API (optional: telemetry off)
//   no_get_desc    aclmdlGetDesc                       a runtime without a required
//                                                      call (the load must fail)
//   no_host_path   aclrtMallocHost, aclrtFreeHost,     a CANN without pinned host
//                  aclrtSynchronizeStreamWithTimeout   memory and bounded syncs
//                                                      (optional: pageable staging,
//                                                      unbounded waits)
//   no_shape_gears aclmdlSetInputDynamicDims,          a runtime that lists dims and
//                  aclmdlSetDynamicHWSize,             image size gears but cannot
//                  aclmdlGetCurOutputDims              set them (such models fail to
//                                                      load naming the call)
//   no_stream_abort aclrtStreamAbort                   a CANN or product without it
//                                                      (Atlas inference/training before
//                                                      CANN 9.0): a timed-out stream is
//                                                      destroyed with
//                                                      aclrtDestroyStreamForce
//   no_dims_v2     aclmdlGetInputDimsV2                a runtime without it: a
//   static-AIPP
//                                                      input fails the load naming it
//   no_stream_stop aclrtStreamAbort,                   a CANN before 7.0: nothing stops
//                  aclrtDestroyStreamForce             a hung stream (aclrtDestroyStream
//                                                      would wait forever)
//   no_device_sync aclrtSynchronizeDeviceWithTimeout   a runtime without the bounded
//                                                      device synchronize: parked
//                                                      executions are leaked at unload
//                                                      (aclrtSynchronizeDevice could
//                                                      block it for ever)
//
// Products (not symbols) are chosen at run time with $NPU_GE_DOUBLE_PRODUCT
// (streams.cc): on atlas_inference (310P), atlas_training and
// atlas_200i_500_a2 aclrtStreamAbort exists and returns
// ACL_ERROR_RT_FEATURE_NOT_SUPPORT, as CANN's product tables say.
//
// This header is documentation and data only: nothing includes it.
#pragma once

// clang-format off
#define ACL_DOUBLE_VARIANTS(X)                                              \
  X(no_telemetry, "aclrtGetDeviceUtilizationRate aclrtGetMemInfo")          \
  X(no_get_desc, "aclmdlGetDesc")                                          \
  X(no_host_path, "aclrtMallocHost aclrtFreeHost aclrtSynchronizeStreamWithTimeout") \
  X(no_shape_gears, "aclmdlSetInputDynamicDims aclmdlSetDynamicHWSize aclmdlGetCurOutputDims") \
  X(no_stream_abort, "aclrtStreamAbort")                                    \
  X(no_dims_v2, "aclmdlGetInputDimsV2")                                      \
  X(no_stream_stop, "aclrtStreamAbort aclrtDestroyStreamForce")            \
  X(no_device_sync, "aclrtSynchronizeDeviceWithTimeout")
// clang-format on
