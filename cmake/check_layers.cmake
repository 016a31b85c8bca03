# The layers, lowest first, and what each may include of the project: a file includes its own
# layer and the layers below it, never one above (docs/architecture.md, "Note: layers"). Run by
# the build before anything compiles (`cmake -P cmake/check_layers.cmake` in the source folder),
# so that an include reaching up fails the build, naming the file, the line and the rule.
#   core        the case model, the interpreter, memory, RNG, the checkpoint interface
#   suts        the subjects: their registry, and the C++ port of Megatron's function (a folder)
#   oracles     eager execution and the comparison of results
#   properties  the properties, the generator, the reducer, the report, export to Python
#   runner      checking cases in worker processes
#   python      the bridge to Python checkpoint code (on properties, beside runner)
#   fuzz        the libFuzzer targets (on properties, beside runner)
#   cli         the command line, on everything
# A test (NAME_test.cpp) is above them all wherever it lives: a subject's folder holds its own.
set(allowed_core core)
set(allowed_suts core suts)
set(allowed_oracles core suts oracles)
set(allowed_properties core suts oracles properties)
set(allowed_runner core suts oracles properties runner)
set(allowed_python core suts oracles properties python)
set(allowed_fuzz core suts oracles properties fuzz)
set(allowed_cli core suts oracles properties runner python cli)
set(layers core suts oracles properties runner python fuzz cli)

if(NOT DEFINED RECHECK_SOURCE_DIR)
  set(RECHECK_SOURCE_DIR ${CMAKE_CURRENT_LIST_DIR}/..)
endif()
set(violations "")
foreach(layer IN LISTS layers)
  file(GLOB_RECURSE files RELATIVE ${RECHECK_SOURCE_DIR}
       ${RECHECK_SOURCE_DIR}/${layer}/*.h ${RECHECK_SOURCE_DIR}/${layer}/*.cpp)
  list(FILTER files EXCLUDE REGEX "_test\\.cpp$")
  foreach(file IN LISTS files)
    file(STRINGS ${RECHECK_SOURCE_DIR}/${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*" "\\1" included "${line}")
      string(FIND "${included}" "/" slash)
      if(slash LESS 1)
        continue()
      endif()
      string(SUBSTRING "${included}" 0 ${slash} target)
      list(FIND layers ${target} is_layer)
      list(FIND allowed_${layer} ${target} is_allowed)
      if(is_layer GREATER -1 AND is_allowed EQUAL -1)
        string(APPEND violations "  ${file} includes ${included}: ${layer}/ may include only ${allowed_${layer}}\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "recheck: includes that reach up a layer (docs/architecture.md, \"Note: layers\"):\n${violations}")
endif()
