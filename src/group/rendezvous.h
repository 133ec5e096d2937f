// The rendezvous of a data-parallel group over c10d's TCPStore, and the store helpers the group's
// collectives share. Only group's own .cpp files include it: it brings c10d's headers.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "group/group.h"

// Gloo's device type where its headers were found at configure time (CMakeLists.txt).
#ifdef NMT_WITH_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif

namespace nmt {

// The variable's value, or null when it is unset or empty.
const char* env_or_null(const char* name);

// The first line of an exception's text (c10's without its backtrace).
std::string error_text(const std::exception& e);

std::vector<uint8_t> bytes_of(const std::string& s);

// The text under `key`, waiting for it up to the store's timeout.
std::string text_at(c10d::Store& store, const std::string& key);

// Where each rank posts its Gloo address (ProcessGroup::addresses).
extern const std::string kAddressKey;

// Connects to the store at MASTER_ADDR:MASTER_PORT (hosting it on rank 0 unless torchrun's
// agent does) and checks every rank's WORLD_SIZE against rank 0's. Throws Error naming the
// address, and the timeout when it was waited out.
c10::intrusive_ptr<c10d::Store> meet(const LaunchEnv& env, std::chrono::seconds timeout);

#ifdef NMT_WITH_GLOO
// Gloo's network device for this rank; `how` says why that address.
std::shared_ptr<gloo::transport::Device> gloo_device(const LaunchEnv& env, std::string& how);

// Every rank connects to the next one's Gloo address before Gloo does, so an unreachable
// address fails every rank at once with a message naming it (rendezvous.cpp).
void check_gloo_reachable(c10d::Store& store, const LaunchEnv& env, const std::string& address,
                          std::chrono::seconds timeout);
#endif

}  // namespace nmt
