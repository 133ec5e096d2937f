#include "util/net.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "util/util.h"

namespace nmt {

namespace {

// An IP address in text and a port as a socket address; false when the text is not an IP.
bool to_sockaddr(const std::string& ip, int port, sockaddr_storage& a, socklen_t& size) {
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a);
  if (::inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    size = sizeof(sockaddr_in);
    return true;
  }
  if (::inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    size = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

}  // namespace

bool is_loopback_address(const std::string& addr) {
  std::string a = addr;
  std::transform(a.begin(), a.end(), a.begin(), [](unsigned char c) { return std::tolower(c); });
  const auto starts = [&](const char* prefix) { return a.rfind(prefix, 0) == 0; };
  return a == "localhost" || starts("127.") || a == "::1" || starts("::ffff:127.");
}

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) throw Error(std::string("cannot find a free TCP port: ") + std::strerror(err));
  return ntohs(addr.sin_port);
}

std::string ip_text(const sockaddr* a) {
  char text[INET6_ADDRSTRLEN] = {};
  const void* ip = nullptr;
  if (a->sa_family == AF_INET) ip = &reinterpret_cast<const sockaddr_in*>(a)->sin_addr;
  if (a->sa_family == AF_INET6) ip = &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr;
  if (ip == nullptr || ::inet_ntop(a->sa_family, ip, text, sizeof(text)) == nullptr) return "";
  return text;
}

std::string address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return "";
  std::string local;
  for (const addrinfo* a = found; a != nullptr && (local.empty() || is_loopback_address(local));
       a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    sockaddr_storage self{};
    socklen_t size = sizeof(self);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &size) == 0)
      if (const auto ip = ip_text(reinterpret_cast<const sockaddr*>(&self));
          local.empty() || !is_loopback_address(ip))
        local = ip;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return local;
}

std::string first_network_interface() {
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return "";
  std::string v4, v6;
  for (const ifaddrs* i = all; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || (i->ifa_flags & IFF_UP) == 0 ||
        (i->ifa_flags & IFF_LOOPBACK) != 0)
      continue;
    const std::string ip = ip_text(i->ifa_addr);
    if (i->ifa_addr->sa_family == AF_INET && v4.empty()) v4 = i->ifa_name;
    if (i->ifa_addr->sa_family == AF_INET6 && v6.empty() && ip.rfind("fe80", 0) != 0)
      v6 = i->ifa_name;
  }
  ::freeifaddrs(all);
  return v4.empty() ? v6 : v4;
}

Listener::Listener(const std::string& ip) {
  sockaddr_storage a{};
  socklen_t size = 0;
  if (!to_sockaddr(ip, 0, a, size)) return;
  fd_ = ::socket(a.ss_family, SOCK_STREAM, 0);
  if (fd_ < 0) return;
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), size) != 0 || ::listen(fd_, 16) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &size) != 0)
    return;
  port_ = ntohs(a.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&a)->sin_port
                                       : reinterpret_cast<sockaddr_in6*>(&a)->sin6_port);
}

Listener::~Listener() {
  if (fd_ >= 0) ::close(fd_);
}

std::string try_connect(const std::string& ip, int port, std::chrono::seconds timeout) {
  sockaddr_storage a{};
  socklen_t size = 0;
  if (!to_sockaddr(ip, port, a, size)) return "not an IP address";
  const int fd = ::socket(a.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) return std::strerror(errno);
  std::string why;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), size) != 0) {
    if (errno != EINPROGRESS) {
      why = std::strerror(errno);
    } else {
      pollfd p{fd, POLLOUT, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(timeout.count() * 1000));
      int err = 0;
      socklen_t len = sizeof(err);
      if (ready == 0)
        why = "no answer within " + std::to_string(timeout.count()) + " s";
      else if (ready < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        why = std::strerror(errno);
      else if (err != 0)
        why = std::strerror(err);
    }
  }
  ::close(fd);
  return why;
}

}  // namespace nmt
