# pmap_engine_random: JAX's threefry PRNG on the host, bit-exact, and the JAX release the engine
# models (jax_release.h). A leaf library: common/ uses it for initial parameters, synthetic data
# and the case key jax.version. Its own file, so that the fuzz build (cmake/ParityFuzz.cmake),
# which builds common/ without the rest of the engine, defines it from the same list.
add_library(pmap_engine_random
  ${CMAKE_CURRENT_LIST_DIR}/src/random/threefry.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/random/prng.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/core/jax_release.cpp
)
target_include_directories(pmap_engine_random PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include)
target_link_libraries(pmap_engine_random PUBLIC parity_warnings)
