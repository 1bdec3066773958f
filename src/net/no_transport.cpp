// Built without UCX: no inter-node transport. A communicator whose ranks span
// nodes fails at creation with this message.
#include "ferry/error.hpp"
#include "ferry/version.hpp"
#include "net/transport.hpp"

namespace ferry {

UcxVersions ucx_versions() { return UcxVersions{}; }
void check_ucx_version() {}

}  // namespace ferry

namespace ferry::net {

std::unique_ptr<Transport> make_transport(Bootstrap&, const Topology& topology) {
  FERRY_THROW(NotSupported,
              "the ranks span " << topology.num_nodes
                                << " nodes, but ferry was built without UCX, so it has no inter-node transport: "
                                   "install UCX (pip install libucx-cu13, or your site's UCX) and configure ferry "
                                   "with -DFERRY_UCX_ROOT=<UCX prefix> (scripts/setup.sh finds the pip one)");
}

bool transport_available() { return false; }

}  // namespace ferry::net
