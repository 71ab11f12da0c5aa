#include <catch2/catch.hpp>

#include "kwd/daemon/jupyter_sessions.hpp"

using namespace kwd::daemon;

TEST_CASE("Jupyter server info: host, port and base URL from its url; token kept apart") {
  const auto server = parse_server_info(
      R"({"base_url": "/lab/", "hostname": "localhost", "password": false, "pid": 4242,
          "port": 8888, "root_dir": "/home/u", "secure": false, "sock": "",
          "token": "abc123", "url": "http://localhost:8888/lab/", "version": "1.23.3"})");
  REQUIRE(server);
  CHECK(server->host == "localhost");
  CHECK(server->port == 8888);
  CHECK(server->base_url == "/lab/");
  CHECK(server->token == "abc123");
  CHECK(server->pid == 4242);

  const auto ipv6 = parse_server_info(R"({"url": "http://[::1]:9999/", "token": ""})");
  REQUIRE(ipv6);
  CHECK(ipv6->host == "::1");
  CHECK(ipv6->port == 9999);
  CHECK(ipv6->base_url == "/");

  const auto no_slash = parse_server_info(R"({"url": "http://127.0.0.1:1/", "base_url": "/x"})");
  REQUIRE(no_slash);
  CHECK(no_slash->base_url == "/x/");
}

TEST_CASE("Jupyter server info: what cannot be asked over plain HTTP is left alone") {
  CHECK_FALSE(parse_server_info("not json"));
  CHECK_FALSE(parse_server_info("[]"));
  CHECK_FALSE(parse_server_info(R"({"url": "https://localhost:8888/"})"));  // TLS: unchecked
  CHECK_FALSE(parse_server_info(R"({"url": "http+unix://%2Ftmp%2Fs/", "sock": "/tmp/s"})"));
  CHECK_FALSE(parse_server_info(R"({"url": "http://localhost:99999/"})"));
  CHECK_FALSE(parse_server_info(R"({"url": "http://:8888/"})"));
  CHECK_FALSE(parse_server_info(R"({"url": 5})"));
}

TEST_CASE("Jupyter sessions: kernel id to notebook path, both server shapes") {
  const auto sessions = parse_sessions(R"([
    {"id": "s1", "path": "work/a.ipynb", "name": "a.ipynb", "type": "notebook",
     "kernel": {"id": "k-1", "name": "python3"}},
    {"id": "s2", "notebook": {"path": "old/b.ipynb"}, "kernel": {"id": "k-2"}},
    {"id": "s3", "path": "console", "kernel": null},
    {"id": "s4", "path": 7, "kernel": {"id": "k-4"}},
    "garbage"
  ])");
  CHECK(sessions ==
        std::map<std::string, std::string>{{"k-1", "work/a.ipynb"}, {"k-2", "old/b.ipynb"}});
  CHECK(parse_sessions("{}").empty());
  CHECK(parse_sessions("<html>login</html>").empty());
}
