// The dashboard's pages, styles and scripts (server/http/assets/), compiled
// into the binary by embed_assets.cmake: the coordinator serves them without
// reading a file or reaching the internet.
#ifndef SMALLEM_SERVER_HTTP_ASSETS_H_
#define SMALLEM_SERVER_HTTP_ASSETS_H_

#include <string_view>

namespace smallem {

struct DashboardAsset {
  std::string_view path;          // "/app.js": the URL path it is served at
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view body;
};

// The asset served at `path`, or nullptr.
const DashboardAsset* FindDashboardAsset(std::string_view path);

}  // namespace smallem

#endif  // SMALLEM_SERVER_HTTP_ASSETS_H_
