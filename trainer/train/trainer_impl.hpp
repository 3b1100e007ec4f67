// Trainer's insides, shared by its three files: gpt_trainer.cpp (the layout, construction, the
// public calls), train_step.cpp (one optimizer step through the pipeline schedule),
// whole_model.cpp (the whole model assembled from every rank's slices: parameters, checkpoints,
// replica checks). Internal to trainer/.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "parallel/expert_parallel.hpp"
#include "parallel/pipeline_parallel.hpp"
#include "parallel/tensor_parallel.hpp"
#include "strata/diloco.hpp"
#include "strata/mesh.hpp"
#include "train/failure_report.hpp"
#include "train/gpt_trainer.hpp"

namespace gpt {

// Where a rank's tensors are: the engine's units are this rank's share of the model's units
// (tensor-parallel slices of its pipeline chunks' units), in the order below, plus, on the last
// stage of a pipeline, the copy of the tied wte (first, so that its late gradient fills the last
// bucket and holds back no other).
struct Trainer::Impl {
  Impl(strata::Communicator job, const CharCorpus& d, TrainOptions opt);

  std::vector<strata::TensorSpec> local_specs();
  template <typename V, typename F>
  std::vector<V> per_tensor(int g, F f);
  Params unit_params(int g);
  Grads unit_grads(int g);
  size_t wte_unit() const;
  size_t wte_tensor() const;
  std::span<const float> wte();
  std::span<float> wte_grad();
  std::vector<float> slice(size_t g, std::span<const float> full) const;
  void ready_unit(int g);
  void finish_dense_average();
  void load_batch(Split split, int step, int m);
  float forward(int micro, int c, int step, Split split, int slot);
  void backward(int micro, int c);
  void launch_tied_reduction();
  double reduce_loss(double local);
  std::vector<float> whole(const std::vector<float>& local);
  std::string write_whole(const std::string& dir);  // whole_model.cpp
  void read_whole(const std::string& dir);
  void save_islands(const std::string& dir);  // island_checkpoint.cpp
  void load_islands(const std::string& dir);
  std::vector<StepReport::Stage> gather_stages(const StepReport& mine);
  std::vector<StepReport::Experts> gather_experts();
  void take_axis_stats(StepReport& r);
  void tally_routing(int l, const Model::ExpertStats& st, double bytes0, double seconds0);
  void tally_exchange(int l, double bytes0, double seconds0);
  void name_groups(strata::Communicator& job);
  StepReport step();
  float evaluate(int batches);

  TrainOptions o;
  const CharCorpus& data;
  strata::Islands islands;  // DiLoCo's split of the job; without it, one island: the job
  strata::Mesh mesh;
  strata::Communicator metrics, tied;   // tied: this pipeline's first and last stage (pp > 1)
  int micro;                            // sequences per micro-batch
  std::unique_ptr<TensorParallel> tp;   // null when tp = 1
  std::unique_ptr<ExpertParallel> ep;   // null when ep = 1
  std::unique_ptr<ContextParallel> cp;  // null when cp = 1
  Pipeline pipe;
  std::vector<int> unit_of;        // global unit -> engine unit (-1: not on this rank)
  int wte_copy = -1;               // engine unit of the tied wte copy, or -1
  std::vector<int> global_tensor;  // engine tensor -> index into param_specs
  std::vector<Model> chunks;       // one per model chunk of this rank's stage
  // The step's routing (sized by local_specs(), like chunks: declared before the engine), per block
  // (empty but for mixture-of-experts blocks): tokens each expert took over the step's
  // micro-batches on this rank, then the assignments dropped, the exchanges' bytes, their
  // formula and their seconds (tally_routing).
  std::vector<std::vector<double>> routed;
  strata::Communicator replicas;  // the engine's group: dp, or cp x dp
  strata::ZeroEngine engine;
  std::unique_ptr<strata::DiLoCo> diloco;  // null without DiLoCo
  std::vector<int> tokens, targets;
  std::optional<strata::Work> tied_work;  // the tied wte's gradient reduction, until awaited
  std::vector<size_t> averaging;          // engine tensors whose average over ep is in flight
  std::unique_ptr<FailureReport> failures;
};

}  // namespace gpt
