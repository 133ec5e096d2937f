// Sockets: the few network questions data-parallel training asks (which address reaches a
// host, which interface is up, can a port be reached), kept out of the training code.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <string>

namespace nmt {

// Whether a MASTER_ADDR or a socket's address is this machine's loopback: "localhost", 127.x,
// ::1, and 127.x mapped into IPv6 (::ffff:127.x, as a dual-stack socket reports it).
bool is_loopback_address(const std::string& addr);

// A loopback TCP port that nothing listens on right now (the kernel's pick).
int free_loopback_port();

// The text form of an IPv4 or IPv6 socket address ("" for other families).
std::string ip_text(const sockaddr* a);

// The address this machine sends from to reach host:port (the source address of its route),
// or "" when there is none. Of the addresses a name resolves to (127.0.1.1 and the real one, on
// the machine it names), the first reached from a non-loopback address wins. Connecting a UDP
// socket sends nothing: it only chooses the route.
std::string address_towards(const std::string& host, int port);

// The name of the first interface that is up and not a loopback, one with IPv4 before one with
// only IPv6 (link-local left out), as NCCL chooses by default; "" when there is none.
std::string first_network_interface();

// A socket listening on `ip` at a port of the kernel's choosing, closed with the object.
class Listener {
 public:
  explicit Listener(const std::string& ip);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  int port() const { return port_; }  // 0: could not listen there

 private:
  int fd_ = -1;
  int port_ = 0;
};

// "" when a TCP connection to ip:port opens within `timeout`, else why not.
std::string try_connect(const std::string& ip, int port, std::chrono::seconds timeout);

}  // namespace nmt
