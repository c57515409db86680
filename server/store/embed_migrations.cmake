# Writes OUTPUT: a C++ file defining smallem::EmbeddedMigrations() from the
# migrations/NNNN_name.sql files in MIGRATIONS_DIR, in file-name order.
# Run at build time: cmake -DMIGRATIONS_DIR=... -DOUTPUT=... -P embed_migrations.cmake
file(GLOB files ${MIGRATIONS_DIR}/*.sql)
list(SORT files)
set(body "")
foreach(file ${files})
  get_filename_component(name ${file} NAME_WE)
  if(NOT name MATCHES "^([0-9][0-9][0-9][0-9])_[a-z0-9_]+$")
    message(FATAL_ERROR "${file}: migrations are named NNNN_snake_case.sql")
  endif()
  math(EXPR version "${CMAKE_MATCH_1}")
  file(READ ${file} sql)
  string(FIND "${sql}" ")smallem_sql\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${file} contains the raw-string delimiter")
  endif()
  string(APPEND body "      {${version}, \"${name}\", R\"smallem_sql(${sql})smallem_sql\"},\n")
endforeach()
set(text "// Generated from migrations/*.sql by server/store/embed_migrations.cmake. Do not edit.
#include \"server/store/migrations.h\"

namespace smallem {

const std::vector<Migration>& EmbeddedMigrations() {
  static const std::vector<Migration> kMigrations = {
${body}  };
  return kMigrations;
}

}  // namespace smallem
")
# Only rewrite when the text changes, so an unchanged schema rebuilds nothing.
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUTPUT} "${text}")
endif()
