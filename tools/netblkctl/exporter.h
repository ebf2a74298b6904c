// `netblkctl exporter --listen ADDR:PORT`: the Prometheus exposition of
// `stats --prometheus` served at /metrics over HTTP, for a scraper that
// pulls (the textfile collector is the other way).  The HTTP server is
// libmicrohttpd's (Debian's libmicrohttpd-dev): a small, well-kept server
// library rather than a request parser of our own.
#pragma once

#include <functional>
#include <netinet/in.h>
#include <optional>
#include <string>
#include <string_view>

// "127.0.0.1:9575" or "0.0.0.0:9575" into `out`; "" when fine, else what is
// wrong, in words for the user.
std::string parse_listen_address(std::string_view text, sockaddr_in &out);

// What a scrape gives: the exposition, or why there is none (the module is
// not loaded, no CAP_NET_ADMIN), answered 503 with that text.
struct scrape_result {
	std::optional<std::string> metrics;
	std::string error;
};

// The answer to one request: its status, content type and body.  GET or
// HEAD of /metrics scrapes; / points to /metrics; anything else is 404, and
// another method 405.
struct http_answer {
	unsigned status;
	std::string content_type;
	std::string body;
};
http_answer exporter_answer(std::string_view method, std::string_view url,
			    const std::function<scrape_result()> &scrape);

// Serves until SIGINT or SIGTERM, one request at a time (a scrape reads
// the module's counters; there is nothing to gain from doing two at once).
// 0 when it stopped on a signal; else 1, having said why on stderr (the
// address is in use, or not this host's).
int run_exporter(const sockaddr_in &addr, const std::function<scrape_result()> &scrape);
