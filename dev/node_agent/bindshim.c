/* Part of the pdd-operator dev node agent (dev/node_agent). NOT a product component.
 *
 * The agent runs every pod of its node as local processes in the host's network namespace, each pod
 * with its own loopback address (PDD_AGENT_POD_IP, e.g. 127.0.100.7). A program in a pod that binds
 * the wildcard address (0.0.0.0, as `vllm serve --host 0.0.0.0` and `pdd router` do) would listen on
 * every address of the host, so two pods using the same port (both engines use 8000) would clash.
 * Preloaded into each container, this bind() narrows a wildcard bind with a FIXED port to the pod's
 * address, which is what the program would get in a pod whose only address is the pod IP:
 * - IPv4 0.0.0.0 -> the pod IP;
 * - IPv6 :: on a dual-stack socket (IPV6_V6ONLY off, as vLLM's `--host ::` opens it) -> ::ffff:<pod IP>,
 *   which serves the pod IP's IPv4 traffic exactly as :: does in a pod of an IPv4-only cluster;
 * - IPv6 :: on an IPv6-only socket (asyncio/aiohttp listening on every family open one beside the IPv4
 *   socket) -> an ephemeral port on ::1: the agent's pods have no IPv6 address, as in an IPv4-only
 *   cluster, so nothing can reach that listener, but it no longer takes the port from other pods.
 * Ephemeral binds (port 0) and other address families are left alone.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static bind_fn real_bind = NULL;
    if (!real_bind) real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
    if (addr && addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)addr;
        const char *pod_ip = getenv("PDD_AGENT_POD_IP");
        if (in->sin_addr.s_addr == htonl(INADDR_ANY) && in->sin_port != 0 && pod_ip && *pod_ip) {
            struct sockaddr_in narrowed;
            memcpy(&narrowed, in, sizeof(narrowed));
            if (inet_pton(AF_INET, pod_ip, &narrowed.sin_addr) == 1)
                return real_bind(fd, (const struct sockaddr *)&narrowed, sizeof(narrowed));
        }
    }
    if (addr && addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)addr;
        const char *pod_ip = getenv("PDD_AGENT_POD_IP");
        if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr) && in6->sin6_port != 0 && pod_ip && *pod_ip) {
            struct sockaddr_in6 narrowed;
            int v6only = 0;
            socklen_t optlen = sizeof(v6only);
            memcpy(&narrowed, in6, sizeof(narrowed));
            if (getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &optlen) == 0 && v6only) {
                narrowed.sin6_addr = in6addr_loopback;
                narrowed.sin6_port = 0;
                return real_bind(fd, (const struct sockaddr *)&narrowed, sizeof(narrowed));
            }
            char mapped[64];
            snprintf(mapped, sizeof(mapped), "::ffff:%s", pod_ip);
            if (inet_pton(AF_INET6, mapped, &narrowed.sin6_addr) == 1)
                return real_bind(fd, (const struct sockaddr *)&narrowed, sizeof(narrowed));
        }
    }
    return real_bind(fd, addr, len);
}
