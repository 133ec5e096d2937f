#include "group/group.h"

#include <cerrno>
#include <cstdlib>

#include "group/process_group.h"
#include "group/rendezvous.h"
#include "util/util.h"

namespace nmt {

namespace {

int env_int(const char* name, int lo, int hi) {
  const char* v = env_or_null(name);
  if (v == nullptr) throw Error(std::string(name) + " is not set (torchrun sets it)");
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi)
    throw Error(std::string(name) + "=" + v + ": expected an integer in [" + std::to_string(lo) +
                ", " + std::to_string(hi) + "]");
  return static_cast<int>(x);
}

}  // namespace

LaunchEnv read_launch_env() {
  LaunchEnv env;
  const bool any = env_or_null("WORLD_SIZE") != nullptr || env_or_null("RANK") != nullptr;
  if (!any) return env;
  env.world_size = env_int("WORLD_SIZE", 1, 1 << 20);
  env.rank = env_int("RANK", 0, env.world_size - 1);
  env.local_rank = env_or_null("LOCAL_RANK") ? env_int("LOCAL_RANK", 0, env.world_size - 1) : 0;
  env.under_torchrun = env_or_null("TORCHELASTIC_RUN_ID") != nullptr;
  const char* addr = env_or_null("MASTER_ADDR");
  if (env.world_size == 1 && addr == nullptr) return env;  // one process, no launcher
  if (addr == nullptr) throw Error("MASTER_ADDR is not set (torchrun sets it)");
  env.master_addr = addr;
  env.master_port = env_int("MASTER_PORT", 1, 65535);
  if (const char* v = env_or_null("TORCHELASTIC_USE_AGENT_STORE"))
    env.agent_store = std::string(v) == "True";
  if (env_or_null("TORCHELASTIC_RESTART_COUNT"))
    env.restart_count = env_int("TORCHELASTIC_RESTART_COUNT", 0, 1 << 20);
  return env;
}

bool cpu_groups_available() {
#ifdef NMT_WITH_GLOO
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Group> make_group(const LaunchEnv& env, const torch::Device& device,
                                  std::chrono::seconds timeout) {
  if (!env.distributed()) return std::make_unique<LocalGroup>();
  return std::make_unique<ProcessGroup>(env, device, timeout);
}

}  // namespace nmt
