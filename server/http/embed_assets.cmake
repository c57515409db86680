# Writes OUTPUT: a C++ file defining smallem::FindDashboardAsset() from the
# files in ASSETS_DIR (the dashboard's HTML, CSS and JS), so that the
# coordinator serves them from its own binary and fetches nothing at run time.
# Run at build time: cmake -DASSETS_DIR=... -DOUTPUT=... -P embed_assets.cmake
file(GLOB files ${ASSETS_DIR}/*)
list(SORT files)
set(body "")
foreach(file ${files})
  get_filename_component(name ${file} NAME)
  if(NOT name MATCHES "^[a-z0-9_-]+\\.(html|css|js|svg)$")
    message(FATAL_ERROR "${file}: dashboard assets are named like app.js (html, css, js or svg)")
  endif()
  set(ext ${CMAKE_MATCH_1})
  if(ext STREQUAL "html")
    set(type "text/html; charset=utf-8")
  elseif(ext STREQUAL "css")
    set(type "text/css; charset=utf-8")
  elseif(ext STREQUAL "js")
    set(type "text/javascript; charset=utf-8")
  else()
    set(type "image/svg+xml")
  endif()
  file(READ ${file} text)
  string(FIND "${text}" ")smallem_asset\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${file} contains the raw-string delimiter")
  endif()
  string(APPEND body "      {\"/${name}\", \"${type}\", R\"smallem_asset(${text})smallem_asset\"},\n")
endforeach()
set(text "// Generated from server/http/assets/ by server/http/embed_assets.cmake. Do not edit.
#include \"server/http/assets.h\"

#include <vector>

namespace smallem {

const DashboardAsset* FindDashboardAsset(std::string_view path) {
  static const std::vector<DashboardAsset> kAssets = {
${body}  };
  for (const DashboardAsset& asset : kAssets) {
    if (asset.path == path) return &asset;
  }
  return nullptr;
}

}  // namespace smallem
")
# Only rewrite when the text changes, so unchanged assets rebuild nothing.
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUTPUT} "${text}")
endif()
