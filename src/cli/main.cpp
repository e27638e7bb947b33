// attnbatch: batch scaled dot-product self-attention over HDF5 datasets.
#include "commands.hpp"

int main(int argc, char** argv) { return attnbatch::cli::run_cli(argc, argv); }
