// Inverted-residual blocks (mobilenet_v2: 1x1 expand + clamp -> 3x3
// depthwise + clamp -> 1x1 project (+ residual Add)) found in a Program and
// run as one op, in bands of output rows: for each band the expand
// convolution computes the input rows the band needs into a ring of rows
// (rows shared with the previous band are kept, not recomputed), the
// depthwise convolution reads the ring, and the project convolution writes
// the band's output rows (adding the residual in the same pass). The
// expanded tensor, 6x the block's input, never leaves a scratch of a few
// hundred KB, so it stays in the core's L2 instead of going out to memory
// and back twice (unfused, the 1x1 convolutions of mobilenet_v2's 112x112
// and 56x56 blocks were bound by memory, README.md).
//
// The 1x1 convolutions run on the plugin's GEMM (xnn_gemm.h), the
// depthwise on its 3x3 kernel (xnn_dwconv.h), AVX-512 or AVX2 (xnn_isa.h); the expanded channels are
// padded to a multiple of 16 inside the scratch. Blocks without an expand
// (mobilenet_v2's first: depthwise -> project) are fused too when their
// input has 16n channels, and so is a 1x1 convolution read only by a
// GlobalAveragePool (a classifier's head), with the FullyConnected after
// it when there is one (xnn_head.h). Threads (more than one, option
// block_split): in bands, each thread takes a contiguous run of items of
// output rows end to end with its own ring (only the rows at the runs'
// edges are expanded twice; idle threads take items from the back of
// others' runs), or in two phases (the expand of all rows, then the
// depthwise + project of chunks of rows; the expanded tensor then goes
// through memory, but no halo rows are recomputed), or by channels (each
// thread expands all pixels for its panels of 32 expanded channels and
// runs the depthwise on them, into a shared depthwise output; then the
// project of a share of the output pixels: large GEMMs and no halo); auto
// splits small maps by channels, else picks bands where the halo is small.
// Consecutive blocks run as one chain in one
// pthreadpool call, stage after stage, so the threads meet the pool's
// barrier once per chain, and a thread the OS preempts holds back one item.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "xnn_api.h"
#include "xnn_gemm.h"
#include "xnn_head.h"
#include "xnn_memory.h"
#include "xnn_program.h"

namespace kiln_xnnpack {

/// How threads share a block (option block_split).
enum class BlockSplit : uint8_t {
  kAuto,    // bands where the halo rows they recompute cost less than the phases' memory round trip
  kBands,   // each thread runs bands of output rows end to end (expand -> depthwise -> project)
  kPhases,  // the expand of all rows, then the depthwise + project of chunks of rows
  kChannels,  // each thread expands + depthwise-convolves its slices of the expanded channels, then the project of chunks of rows
};
/// auto, bands, phases or channels; throws kiln::sdk::Error naming the option otherwise.
BlockSplit parse_block_split(const std::string& s);

struct BlockFusion {
  bool enabled = true;   // option fuse_blocks
  size_t band_rows = 0;  // output rows a band computes at a time (option block_rows; 0: sized to the cache)
  BlockSplit split = BlockSplit::kAuto;
  bool stem = true;  // option fuse_stem: small-channel KxK convolutions of an NCHW input by the stem kernel (xnn_stem.h)
  bool head_fc = true;   // option fuse_head_fc: a FullyConnected after the head joins it (xnn_head.h)
};

class FusedBlocks {
 public:
  /// Finds the blocks of `p` (none when `f.enabled` is false or
  /// kernel_isa() is kNone) and its stems (`f.stem`; fused with the block
  /// after them only when `f.enabled`) and packs their weights; `threads`
  /// bands run at once.
  FusedBlocks(const Program& p, const BlockFusion& f, size_t threads);
  ~FusedBlocks();
  FusedBlocks(const FusedBlocks&) = delete;
  FusedBlocks& operator=(const FusedBlocks&) = delete;

  /// Inverted-residual blocks (not counting the 1x1 convolutions fused with
  /// their GlobalAveragePool, which run the same way).
  size_t count() const;
  /// Whether op i belongs to a block (the runtime runs it in a native segment).
  bool covers(size_t op) const { return block_of_[op] >= 0; }
  /// Whether op i is the first op of a block, and the index past its last.
  bool starts(size_t op) const;
  size_t end(size_t op) const;
  /// The first op of the block op i belongs to.
  size_t first(size_t op) const;
  /// The block starting at op i in words (shapes, stride, residual), for profiles.
  std::string describe(size_t op) const;
  /// Stem convolutions (xnn_stem.h), with the block they feed or alone.
  size_t stems() const { return stems_; }
  /// Whether a partition input is read only by a stem, in the host's NCHW
  /// layout (the runtime then binds it without the layout transpose).
  bool reads_nchw(uint32_t value) const { return value < stem_input_.size() && stem_input_[value] != 0; }
  /// Values only written and read inside a block (never in memory).
  bool hidden(uint32_t value) const { return value < hidden_.size() && hidden_[value] != 0; }
  /// The index past the consecutive blocks that start at op i and end at
  /// or before op `stop` (i itself when no block starts there).
  size_t chain_end(size_t op, size_t stop) const;
  /// Runs the consecutive blocks from op i to op `stop` (a chain_end());
  /// `ptr` holds where each value is. Threads meet once for all of them.
  void run(size_t op, size_t stop, const std::vector<float*>& ptr, pthreadpool_t pool, uint32_t flags);
  size_t scratch_bytes() const {
    return (scratch_.size() + expanded_.size() + dw_all_.size() + fc_parts_.size()) * sizeof(float);
  }
  /// Heads that run their FullyConnected fused (xnn_head.h).
  size_t heads_with_fc() const { return heads_fc_; }

  struct Block;
  struct Stage;
  struct StageSync;
  struct Chain;
  struct ItemRun {  // one thread's items of a banded block (xnn_block.cpp)
    alignas(64) std::atomic<uint64_t> items{0};
  };

 private:
  std::vector<std::unique_ptr<Block>> blocks_;
  std::vector<int32_t> block_of_;  // per op: index into blocks_, or -1
  std::vector<uint8_t> hidden_;    // per value
  size_t threads_ = 1;
  size_t pools_ = 0;  // of blocks_: 1x1 convolutions + GlobalAveragePool
  size_t stems_ = 0, stems_alone_ = 0;  // of blocks_: with a stem; a stem alone
  std::vector<uint8_t> stem_input_;     // per value: a partition input a stem reads as NCHW
  size_t heads_fc_ = 0;  // of those, with their FullyConnected
  FloatBuffer fc_parts_;         // per head with FC: threads_ partial outputs (Block::fc_at)
  size_t per_task_ = 0;                 // floats of scratch per band
  FloatBuffer scratch_;                 // threads_ x per_task_
  size_t max_band_ = 0;                 // rows of the tallest band
  std::vector<const float*> row_ptrs_;  // threads_ x max_band_ x 3: the input rows of each band row
  FloatBuffer expanded_;                // threads_ > 1: the largest expanded tensor (two phases, channels)
  FloatBuffer dw_all_;                  // threads_ > 1: the largest depthwise output of a block split by channels
  std::vector<Stage> stages_;            // threads_ > 1: the stages of the chain running
  std::unique_ptr<StageSync[]> sync_;    // per stage of the chain
  std::unique_ptr<ItemRun[]> runs_;      // per stage of the chain x thread: the items of a banded block it has left
};

}  // namespace kiln_xnnpack
