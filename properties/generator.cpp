#include "properties/generator.h"

#include "properties/case_builder.h"

namespace recheck {

rc::Gen<Case> gen_case(const GenOptions& options) {
  return rc::gen::exec([options] { return build_case(options, nullptr); });
}

Case decode_case(const uint8_t* data, std::size_t size, const GenOptions& options) {
  FuzzedDataProvider bytes(data, size);
  return build_case(options, &bytes);
}

GenOptions options_for(GenOptions options, const CheckpointImplementation& sut) {
  const RngSources sources = sut.rng_sources(options.device == "cuda");
  options.device_rng = options.device_rng && sources.device;
  options.tracker_rng = options.tracker_rng && sources.tracker;
  if (!sut.distributes(options.device == "cuda")) options.distribute_one_in = 0;
  options.call_options = sut.call_options();
  options.without_output = sut.runs_without_output();
  options.without_output_non_tensors = options.without_output && sut.without_output_takes_non_tensors();
  return options;
}

Case draw_case(const GenOptions& options, uint64_t seed) {
  return gen_case(options)(rc::Random(seed), rc::kNominalSize).value();
}

void showValue(const Case& c, std::ostream& os) { os << show(c); }

}  // namespace recheck
