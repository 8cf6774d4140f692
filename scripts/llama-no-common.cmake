# Included at llama.cpp's project() (scripts/install.sh passes -DCMAKE_PROJECT_llama.cpp_INCLUDE=<this file>).
# llama-cpp-python turns llama.cpp's `common` library on (and with it cpp-httplib) but never installs or
# loads it: the Python package loads libllama and libggml* only. Off again, its sources (half of the
# build's compile time, measured by benchmarks/install.py's notes) are not compiled.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
