#include "parity/common/dropout_sites.h"

#include "parity/common/model_layers.h"

namespace parity {
namespace {

// The dropout sites of `layers`, named by `namer` under `path`; a residual's branch and
// projection share its namer (its projection's modules continue the branch's counters).
void collect_sites(const std::vector<LayerSpec>& layers, ModuleNamer& namer,
                   const std::vector<std::string>& path, std::vector<DropoutSite>& sites) {
  for (const LayerSpec& layer : layers) {
    std::vector<std::string> child = path;
    child.push_back(namer.next(layer.kind));
    if (layer.kind == "dropout" && layer.rate > 0) {
      sites.push_back({join_module_path(child), layer.rate});
    }
    if (layer.kind != "residual") continue;
    ModuleNamer inner;
    collect_sites(layer.layers, inner, child, sites);
    collect_sites(layer.projection, inner, child, sites);
  }
}

}  // namespace

std::vector<DropoutSite> dropout_sites(const ModelSpec& model) {
  std::vector<DropoutSite> sites;
  ModuleNamer namer;
  collect_sites(model.layers, namer, {}, sites);
  return sites;
}

}  // namespace parity
