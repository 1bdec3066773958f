// The EP path table (ep_paths.hpp).
#include "ep/ep_paths.hpp"

#include "ep/ep_buffer_state.hpp"
#include "ep/internode_params.hpp"
#include "ferry/error.hpp"

namespace ferry::ep {
namespace {

using State = EpBuffer::State;

constexpr EpPath kIntranodeExpanded{
    "intranode expanded", true, true, 0, false, true,
    [](const State&, const Params& p, cudaStream_t s) { launch_dispatch_send(p, s); },
    [](const State&, const Params& p, cudaStream_t s) { launch_dispatch_recv(p, s); },
    [](const State& st, const Params& p, cudaStream_t s) {
      launch_combine_send(p, s, st.grids.one_role, st.combine_prefetch_max_blocks);
    },
    [](const State& st, const Params& p, cudaStream_t s) { launch_combine_recv(p, s, st.grids.one_role); },
};

constexpr EpPath kIntranodeRankRows{
    "intranode rank_rows", true, true, 1, true, false,  // NOTE [EP rank rows], [EP rank rows one grid]
    [](const State&, const Params& p, cudaStream_t s) { launch_rank_rows_dispatch_send(p, s); },
    [](const State&, const Params& p, cudaStream_t s) { launch_rank_rows_dispatch_recv(p, s); },
    [](const State&, const Params& p, cudaStream_t s) {
      p.zero_copy_combine ? launch_rank_rows_pull_combine_send(p, s) : launch_rank_rows_combine_send(p, s);
    },
    [](const State&, const Params& p, cudaStream_t s) {
      p.zero_copy_combine ? launch_rank_rows_pull_combine_recv(p, s) : launch_rank_rows_combine_recv(p, s);
    },
};

// NOTE [EP across nodes]: the halves run at once (the receive half places ranges of records, or sums
// ranges of partials, as they land: NOTE [EP across nodes: pipelined ranges]).
constexpr EpPath kDirectExpanded{
    "direct cross-node expanded", false, true, 0, false, false,
    [](const State& st, const Params& p, cudaStream_t s) { launch_net_dispatch_send(st.net(p), s); },
    [](const State& st, const Params& p, cudaStream_t s) { launch_net_dispatch_recv(st.net(p), s); },
    [](const State& st, const Params& p, cudaStream_t s) { launch_net_combine_send(st.net(p), s); },
    [](const State& st, const Params& p, cudaStream_t s) { launch_net_combine_recv(st.net(p), s); },
};

// NOTE [EP hierarchical] (internode_hier.cuh).
constexpr EpPath kHierarchicalExpanded{
    "hierarchical cross-node expanded", false, false, 0, false, false,
    [](const State& st, const Params& p, cudaStream_t s) { launch_hier_dispatch_send(st.hier(p), s); },
    [](const State& st, const Params& p, cudaStream_t s) { launch_hier_dispatch_recv(st.hier(p), s); },
    [](const State& st, const Params& p, cudaStream_t s) { launch_hier_combine_send(st.hier(p), s); },
    [](const State& st, const Params& p, cudaStream_t s) { launch_hier_combine_recv(st.hier(p), s); },
};

// [path: intranode, direct, hierarchical][layout: expanded, rank rows]; nullptr: no such path.
constexpr const EpPath* kPaths[3][2] = {
    {&kIntranodeExpanded, &kIntranodeRankRows},
    {&kDirectExpanded, nullptr},
    {&kHierarchicalExpanded, nullptr},
};

}  // namespace

const EpPath& choose_path(bool spans_nodes, bool hierarchical, EpLayout layout, int world_size, int num_nodes) {
  const int where = !spans_nodes ? 0 : hierarchical ? 2 : 1;
  const EpPath* path = kPaths[where][layout == EpLayout::kRankRows ? 1 : 0];
  FERRY_CHECK(path != nullptr, NotSupported,
              "EpBuffer: layout " << ep_layout_name(layout) << " runs inside one node; these " << world_size
                                  << " ranks span " << num_nodes << " nodes (use layout expanded across nodes)");
  return *path;
}

}  // namespace ferry::ep
