#ifndef FOLIO_CLIENT_COMMANDS_H_
#define FOLIO_CLIENT_COMMANDS_H_

// The `folio` subcommands that talk to a cluster. Each takes the arguments
// after its name and returns the process exit status.

namespace folio {

// `folio serve`: folio-scheduler plus --tensor-parallel-size folio-worker
// processes on this machine; Ctrl-C stops them all.
int ServeMain(int argc, char** argv);

// `folio generate "prompt"`: streams a generation from a running cluster.
int GenerateMain(int argc, char** argv);

// `folio bench`: the serving benchmark client (client/bench_command.cc).
int BenchMain(int argc, char** argv);

}  // namespace folio

#endif  // FOLIO_CLIENT_COMMANDS_H_
