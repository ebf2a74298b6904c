// SPDX-License-Identifier: GPL-2.0
/* exporter --listen (exporter.cpp): the listen address, the answers, and the
 * exporter itself in a child process over a real socket. */
#include "helpers.h"

#include <arpa/inet.h>
#include <csignal>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exporter.h"
#include "prometheus.h"

namespace {

// A free TCP port on 127.0.0.1 (bound, then let go: the exporter takes it next).
uint16_t free_tcp_port(int *keep_fd = nullptr)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(a);
	if (bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a)) ||
	    getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len))
		return 0;
	if (keep_fd) {
		listen(fd, 1);
		*keep_fd = fd;
	} else {
		close(fd);
	}
	return ntohs(a.sin_port);
}

// One HTTP/1.0 request to 127.0.0.1:port; the whole response, "" on failure.
std::string http_get(uint16_t port, const std::string &request)
{
	for (int attempt = 0; attempt < 100; attempt++) {	// the server may not listen yet
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		sockaddr_in a{};
		a.sin_family = AF_INET;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a.sin_port = htons(port);
		if (connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a))) {
			close(fd);
			usleep(50000);
			continue;
		}
		if (write(fd, request.data(), request.size()) != (ssize_t)request.size()) {
			close(fd);
			return {};
		}
		std::string out;
		char buf[4096];
		ssize_t n;
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			out.append(buf, n);
		close(fd);
		return out;
	}
	return {};
}

// A child process runs the exporter with a fixed scrape; 0 if it could not start.
pid_t start_exporter(uint16_t port, bool module_loaded)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid < 0 ? 0 : pid;
	sockaddr_in a;
	parse_listen_address("127.0.0.1:" + std::to_string(port), a);
	auto scrape = [module_loaded]() -> scrape_result {
		if (!module_loaded)
			return {std::nullopt, "the netblk module is not loaded (modprobe netblk)"};
		return {format_prometheus({example()}), {}};
	};
	_exit(run_exporter(a, scrape));
}

int stop_exporter(pid_t pid)
{
	kill(pid, SIGTERM);
	int status = 0;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

} // namespace

TEST(Exporter, ListenAddressIsAnIpv4AddressAndAPort)
{
	sockaddr_in a;
	EXPECT_EQ(parse_listen_address("127.0.0.1:9575", a), "") << "listen address";
	EXPECT_TRUE(a.sin_port == htons(9575) && a.sin_addr.s_addr == htonl(INADDR_LOOPBACK))
		<< "listen address parsed";
	EXPECT_TRUE(parse_listen_address("9575", a).find("ADDR:PORT") != std::string::npos &&
		parse_listen_address("localhost:9575", a).find("not an IPv4") !=
		std::string::npos &&
		parse_listen_address("0.0.0.0:0", a).find("1..65535") != std::string::npos &&
		parse_listen_address("0.0.0.0:70000", a).find("1..65535") != std::string::npos)
			<< "bad listen addresses say what to give";
}

TEST(Exporter, AnswersGetMetricsWithAScrapeAndRefusesTheRest)
{
	int scrapes = 0;
	auto ok = [&]() -> scrape_result {
		scrapes++;
		return {"netblk_x 1\n", {}};
	};
	http_answer r = exporter_answer("GET", "/metrics", ok);
	EXPECT_TRUE(r.status == 200 && r.body == "netblk_x 1\n" && scrapes == 1 &&
		r.content_type == "text/plain; version=0.0.4; charset=utf-8")
			<< "GET /metrics scrapes";
	EXPECT_TRUE(exporter_answer("POST", "/metrics", ok).status == 405 && scrapes == 1)
		<< "POST: 405, no scrape";
	EXPECT_EQ(exporter_answer("GET", "/other", ok).status, 404) << "another path: 404";
	EXPECT_TRUE(contains(exporter_answer("GET", "/", ok).body, "/metrics")) << "/ points on";
	r = exporter_answer("GET", "/metrics",
			    [] { return scrape_result{std::nullopt, "not loaded"}; });
	EXPECT_TRUE(r.status == 503 && r.body.find("not loaded") != std::string::npos)
		<< "no module: 503 saying why";
}

// Over a real socket, in a child: HTTP from libmicrohttpd, SIGTERM ends it.
TEST(Exporter, ServesHttpInAChildUntilSigtermAndFailsOnAPortInUse)
{
	uint16_t port = free_tcp_port();
	pid_t pid = start_exporter(port, true);
	std::string resp = http_get(port, "GET /metrics HTTP/1.0\r\n\r\n");
	EXPECT_TRUE(resp.starts_with("HTTP/1.0 200") || resp.starts_with("HTTP/1.1 200"))
		<< "exporter answers 200";
	EXPECT_TRUE(resp.find("\r\n\r\n# HELP netblk_requests_total ") != std::string::npos &&
		resp.find("netblk_requests_total{port=\"7000\",device=\"nvme0n1p2\"") !=
		std::string::npos) << "exporter body is the exposition";
	resp = http_get(port, "DELETE /metrics HTTP/1.0\r\n\r\n");
	EXPECT_TRUE(resp.find(" 405 ") != std::string::npos && resp.find("Allow: GET, HEAD") !=
		std::string::npos) << "exporter refuses other methods";
	EXPECT_TRUE(pid && stop_exporter(pid) == 0) << "SIGTERM stops the exporter, status 0";

	pid = start_exporter(port = free_tcp_port(), false);
	resp = http_get(port, "GET /metrics HTTP/1.0\r\n\r\n");
	EXPECT_TRUE(resp.find(" 503 ") != std::string::npos && resp.find("modprobe netblk") !=
		std::string::npos) << "exporter without the module: 503";
	stop_exporter(pid);

	int busy_fd = -1;
	port = free_tcp_port(&busy_fd);
	pid = start_exporter(port, true);
	int status = 0;
	waitpid(pid, &status, 0);
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1)
		<< "a port in use: exit status 1";
	close(busy_fd);
}
