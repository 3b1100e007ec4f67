#include "shm/writer_input.hpp"

#include <cstring>

namespace strata::shm {

WriterInput::WriterInput(Context& c, SizedWriteModeChoice* choices, const void* in, size_t extent,
                         size_t payload, std::optional<bool> leader_single_copy, uint8_t* relay_to)
    : c_(c), in_(static_cast<const uint8_t*>(in)), relay_(relay_to) {
  if (relay_) return;
  // A symmetric buffer's input is read with plain loads: faster than the kernel's copy.
  direct_ = c.seg.windows().find(in, extent);
  if (direct_.id) return;
  bool offer = c.seg.single_copy_possible();
  ShmWriteMode policy = config().shm_write_mode;
  if (leader_single_copy && *leader_single_copy && offer) {
    policy = ShmWriteMode::single_copy;
  } else if (leader_single_copy) {
    offer = false;
  }
  stage_.emplace(choices, payload, &c.seg, offer, policy);
}

void WriterInput::stage(void* to, const void* from, size_t k) const {
  if (relay_)
    std::memcpy(relay_ + (static_cast<const uint8_t*>(from) - in_), from, k);
  else if (staged())
    (*stage_)(to, from, k);
}

void WriterInput::publish(uint64_t chunk, const Expect& e, size_t off) const {
  if (relay_)
    publish_written(c_.seg, chunk, e, kChunkInWriterMemory, relay_ + off);
  else if (direct_.id)
    publish_written(c_.seg, chunk, e, direct_source(direct_.id, direct_.offset + off));
  else if (!staged())
    publish_written(c_.seg, chunk, e, kInWriterMemory, in_ + off);
  else
    publish_written(c_.seg, chunk, e);
}

void WriterInput::finish() {
  // Unstaged, the peers' reads of this input are part of what the mode costs.
  if (!staged()) wait_all(c_.seg, &SlotHeader::consumed, c_.seg.next_chunk, c_.deadline, c_.where);
  if (stage_) stage_->done();
}

}  // namespace strata::shm
