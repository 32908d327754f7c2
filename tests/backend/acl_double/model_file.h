// TEST DOUBLE. The ".om" files the ACL runtime double "loads" are small text
// descriptions, not ATC output. Format (one directive per line, '#' comments):
//
//   npu_ge_acl_double_model v1
//   input  x FP32 -1,4                       name dtype dims (-1 = batch gear)
//   output y FP32 -1,4 from x scale 2 offset 1   y = 2 * (x [+ more]) + 1
//   gears 1,2,4,8                            dynamic batch gears
//   dynamic_dims 8;16;32                     dims gears (atc --dynamic_dims): the
//                                            values of the inputs' -1 dims, in
//                                            order, per gear
//   dynamic_dims_order m,x                   the inputs named in atc --input_shape,
//                                            in its order (default: every input,
//                                            model order): dynamic_dims values and
//                                            the gear lists of aclmdlGet/Set-
//                                            InputDynamicDims follow it, as CANN's
//                                            do; unnamed inputs must be static
//   dynamic_image_size 224,224;448,448       image size gears (atc
//                                            --dynamic_image_size): H,W per gear
//                                            for the inputs' two -1 dims
//   delay_us 2000                            per-execute delay (fixed part)
//   delay_per_row_us 50                      plus this per executed row (gear rows)
//   fail_execute_on_value -7                 execute fails if input 0 has -7
//   hang_on_value 99                         execute never finishes if input 0 has
//                                            99 (until its stream is aborted or
//                                            destroyed by force)
//   overflow_on_value 5 [207003]             execute completes (outputs written)
//                                            but reports an overflow-type code
//                                            (default ACL_ERROR_RT_AICORE_OVER_FLOW)
//                                            at the next synchronize, as CANN's
//                                            runtime does; the stream goes on
//   aipp_image_dims x 1,4,4,3                x is a static-AIPP input (e.g. YUV420SP,
//                                            declared with its real layout 1,6,4,1):
//                                            aclmdlGetInputDims reports these image
//                                            dims, which do not multiply out to its
//                                            size; aclmdlGetInputDimsV2 reports the
//                                            real layout (CANN's table for static AIPP)
//   fail_load                                aclmdlLoadFromFile fails
//   weight_bytes 1048576                     device memory the weights take
//   outputs_at_largest_gear                  aclmdlGetOutputDims reports the
//                                            largest gear for a -1 batch dim
//                                            (as some CANN versions do)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "acl/acl.h"

namespace acl_double {

struct TensorSpec {
  std::string name;
  aclDataType dtype = ACL_FLOAT;
  std::vector<int64_t> dims;
  // Static AIPP (aipp_image_dims): what aclmdlGetInputDims reports, the image's
  // dims; `dims` are the real layout (aclmdlGetInputDimsV2, sizes).
  std::vector<int64_t> image_dims;
};

struct OutputSpec : TensorSpec {
  std::vector<size_t> from;  // input indices summed
  double scale = 1;
  double offset = 0;
};

struct ModelSpec {
  std::vector<TensorSpec> inputs;
  std::vector<OutputSpec> outputs;
  std::vector<uint64_t> gears;
  std::vector<std::vector<int64_t>> dims_gears;  // values of the -1 dims, per gear
  std::vector<size_t> dims_order;  // input indexes in --input_shape order (empty: all)
  // The inputs a dims gear lists, in its order.
  std::vector<size_t> DimsGearInputs() const;
  // Every listed input's dims in dims gear `g`, concatenated (CANN's gear list).
  std::vector<int64_t> DimsGearList(size_t g) const;
  std::vector<std::pair<uint64_t, uint64_t>> hw_gears;

  // Any kind of gears: the model then has the extra ACL_DYNAMIC_TENSOR_NAME input.
  bool HasDynamicInput() const
  {
    return !gears.empty() || !dims_gears.empty() || !hw_gears.empty();
  }
  // Dims of input `t` (index `input`) in dims gear `g`, or image size gear `g`.
  std::vector<int64_t> DimsInGear(size_t input, size_t g) const;
  int64_t delay_us = 0;
  double delay_per_row_us = 0;
  bool has_fail_value = false;
  double fail_value = 0;
  bool has_hang_value = false;
  double hang_value = 0;
  bool has_overflow_value = false;
  double overflow_value = 0;
  aclError overflow_code = ACL_ERROR_RT_AICORE_OVER_FLOW;
  bool fail_load = false;
  bool outputs_at_largest_gear = false;
  uint64_t weight_bytes = 1 << 20;

  // Dims or image size gears (not batch gears).
  size_t ShapeGearCount() const { return dims_gears.size() + hw_gears.size(); }
  // Bytes of tensor `t` shaped like input `input` in shape gear `g`.
  size_t BytesInGear(const TensorSpec& t, size_t input, size_t g) const;
  // Rows a tensor is sized for: largest gear for a -1 batch dim.
  uint64_t MaxRows() const;
  size_t TensorBytes(const TensorSpec& t, uint64_t rows) const;
  size_t ElementsPerRow(const TensorSpec& t) const;
};

// Parses 'path'; on failure returns false with a message.
bool LoadModelSpec(const std::string& path, ModelSpec* spec, std::string* error);

size_t DtypeSize(aclDataType dtype);
bool DtypeFromName(const std::string& name, aclDataType* dtype);
double ReadElement(const void* base, aclDataType dtype, size_t index);
void WriteElement(void* base, aclDataType dtype, size_t index, double value);

}  // namespace acl_double
