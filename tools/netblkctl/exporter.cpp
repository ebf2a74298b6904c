// The /metrics HTTP endpoint: see exporter.h.
#include "exporter.h"

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <microhttpd.h>

namespace {

constexpr const char metrics_type[] = "text/plain; version=0.0.4; charset=utf-8";
constexpr const char text_type[] = "text/plain; charset=utf-8";
constexpr unsigned connection_timeout_s = 10;	// a client that stalls is dropped
constexpr unsigned connection_limit = 16;

struct exporter_ctx {
	const std::function<scrape_result()> *scrape;
};

// libmicrohttpd calls this once a request's headers are in (a GET has no
// body to wait for; a body of another method is never read: 405).
MHD_Result on_request(void *cls, MHD_Connection *conn, const char *url, const char *method,
		      const char * /*version*/, const char * /*upload_data*/,
		      size_t *upload_data_size, void **req_cls)
{
	// The first call for a request only announces it; answer on the second,
	// as libmicrohttpd's examples do, so that an upload is not read at all.
	static int announced;
	if (*req_cls != &announced) {
		*req_cls = &announced;
		return MHD_YES;
	}
	*upload_data_size = 0;
	auto *ctx = static_cast<exporter_ctx *>(cls);
	http_answer a = exporter_answer(method, url, *ctx->scrape);
	MHD_Response *r = MHD_create_response_from_buffer(a.body.size(), a.body.data(),
							  MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, a.content_type.c_str());
	if (a.status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	MHD_Result ret = MHD_queue_response(conn, a.status, r);
	MHD_destroy_response(r);
	return ret;
}

std::string format_address(const sockaddr_in &a)
{
	char ip[INET_ADDRSTRLEN] = "?";
	inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip));
	return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
}

} // namespace

std::string parse_listen_address(std::string_view text, sockaddr_in &out)
{
	size_t colon = text.rfind(':');
	if (colon == std::string_view::npos)
		return "--listen wants ADDR:PORT (127.0.0.1:9575, or 0.0.0.0:9575 for every address), "
		       "not '" + std::string(text) + "'";
	std::string addr(text.substr(0, colon));
	std::string port(text.substr(colon + 1));
	out = {};
	out.sin_family = AF_INET;
	if (inet_pton(AF_INET, addr.c_str(), &out.sin_addr) != 1)
		return "--listen: '" + addr + "' is not an IPv4 address";
	char *end;
	errno = 0;
	unsigned long p = strtoul(port.c_str(), &end, 10);
	if (port.empty() || *end || errno || p == 0 || p > 65535)
		return "--listen: bad port '" + port + "' (want 1..65535)";
	out.sin_port = htons(static_cast<uint16_t>(p));
	return {};
}

http_answer exporter_answer(std::string_view method, std::string_view url,
			    const std::function<scrape_result()> &scrape)
{
	if (method != "GET" && method != "HEAD")
		return {405, text_type, "netblkctl exporter: only GET and HEAD\n"};
	if (url == "/")
		return {200, "text/html; charset=utf-8",
			"<html><head><title>netblk exporter</title></head><body>"
			"<h1>netblk exporter</h1><p><a href=\"/metrics\">Metrics</a></p>"
			"</body></html>\n"};
	if (url != "/metrics")
		return {404, text_type, "netblkctl exporter: no " + std::string(url) +
						", the metrics are at /metrics\n"};
	scrape_result r = scrape();
	if (!r.metrics)
		return {503, text_type, "netblkctl exporter: " + r.error + "\n"};
	return {200, metrics_type, std::move(*r.metrics)};
}

int run_exporter(const sockaddr_in &addr, const std::function<scrape_result()> &scrape)
{
	// Blocked before the server's thread starts, so that it inherits the
	// mask and the signals come to sigwait below.
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

	exporter_ctx ctx{&scrape};
	MHD_Daemon *d = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, ntohs(addr.sin_port), nullptr,
		nullptr, on_request, &ctx, MHD_OPTION_SOCK_ADDR, &addr,
		MHD_OPTION_CONNECTION_TIMEOUT, connection_timeout_s, MHD_OPTION_CONNECTION_LIMIT,
		connection_limit, MHD_OPTION_END);
	if (!d) {
		int err = errno;
		fprintf(stderr, "netblkctl: cannot listen on %s: %s\n", format_address(addr).c_str(),
			err ? strerror(err) : "libmicrohttpd refused");
		return 1;
	}
	fprintf(stderr, "netblkctl: serving the metrics at http://%s/metrics until SIGINT or SIGTERM\n",
		format_address(addr).c_str());
	int sig = 0;
	sigwait(&sigs, &sig);
	MHD_stop_daemon(d);
	return 0;
}
