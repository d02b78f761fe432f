// Inter-op parallelism: which consecutive steps of a program may run at the
// same time. A group is a run of consecutive steps in which no step reads a
// value another step of the group produces; Program::run hands a group of two
// or more steps to ThreadPool::run_tasks, so independent branches (the
// expand1x1 / expand3x3 convolutions of a fire module, Inception-style
// branches) each take a thread, and a thread that finishes its step helps
// with the other's chunks. Chunks are the same as in the sequential order,
// so results are too.
//
// Steps of a group are live at once, so the memory plan treats a group as one
// step (group_edges widens every lifetime to whole groups).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/program.h"

namespace kiln::runtime {

/// Most steps in one group.
inline constexpr size_t kMaxGroupSteps = 4;
/// Steps whose outputs have statically fewer elements than this stay alone:
/// handing them to another thread costs more than running them.
inline constexpr int64_t kMinGroupedElements = 2048;

/// Group boundaries: group i is steps [begin[i], begin[i + 1]); the last
/// element is steps.size(). Steps that run backend partitions, subgraphs,
/// nondeterministic ops or views of their input (kAliasesInput0), and tiny
/// steps (kMinGroupedElements), stay alone.
std::vector<uint32_t> concurrent_groups(const std::vector<Step>& steps, const ir::Graph& graph);

/// Per step, the first (`last` false) or last (`last` true) step of its group.
std::vector<int32_t> group_edges(const std::vector<uint32_t>& begin, bool last);

/// Whether Program::run runs a group's steps at once on a pool of two or
/// more threads (otherwise one after the other). Process-wide; starts as the
/// environment says: KILN_INTEROP=0 turns it off, anything else leaves it on.
bool interop_enabled();
void set_interop_enabled(bool on);

}  // namespace kiln::runtime
