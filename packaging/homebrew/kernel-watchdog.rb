# Homebrew formula for kernel-watchdog, for a tap (Formula/kernel-watchdog.rb there).
#
# No release is tagged yet, so the formula builds the default branch:
#   brew install --HEAD kernel-watchdog/tap/kernel-watchdog
# A release adds `url` (the tag's source tarball) and its `sha256` above `head`.
#
# `brew services start kernel-watchdog` runs the daemon as a launchd agent with the settings
# of launchd/org.kernel-watchdog.daemon.plist (the agent `kernel-watchdog service install`
# writes); packaging/homebrew/check_formula.rb holds the two together. Use one of the two, not
# both: a second daemon finds the first one's status socket and exits with status 1, which
# launchd answers by starting it again every 10 s.
class KernelWatchdog < Formula
  desc "Crash watchdog for Jupyter kernels: a report says why a kernel died"
  homepage "https://github.com/kernel-watchdog/kernel-watchdog"
  license "MIT"
  head "https://github.com/kernel-watchdog/kernel-watchdog.git", branch: "main"

  depends_on "cmake" => :build
  depends_on "cppzmq" => :build
  depends_on "cpp-httplib" => :build
  depends_on "cli11" => :build
  depends_on "ninja" => :build
  depends_on "nlohmann-json" => :build
  depends_on "pkgconf" => :build
  depends_on "fmt"
  depends_on "openssl@3"
  depends_on "simdjson"
  depends_on "spdlog"
  depends_on "zeromq"

  def install
    # The tests need Catch2 2, which Homebrew does not have; the GitHub workflow runs them.
    system "cmake", "-S", ".", "-B", "build", "-G", "Ninja",
                    "-DKWD_BUILD_TESTS=OFF", "-DKWD_WERROR=OFF",
                    "-DOPENSSL_ROOT_DIR=#{Formula["openssl@3"].opt_prefix}",
                    *std_cmake_args
    system "cmake", "--build", "build"
    system "cmake", "--install", "build"
  end

  def caveats
    <<~EOS
      Start the daemon with either `brew services start kernel-watchdog` or
      `kernel-watchdog service install`, not both.
      Wrap a kernel: kernel-watchdog kernelspec wrap python3
    EOS
  end

  service do
    run [opt_bin/"kernel-watchdog", "daemon"]
    run_type :immediate
    keep_alive successful_exit: false
    process_type :background
    log_path var/"log/kernel-watchdog/daemon.log"
    error_log_path var/"log/kernel-watchdog/daemon.log"
  end

  test do
    # A --HEAD install's version is HEAD-<commit>: the program's own is the project's.
    assert_match(/\A\d+\.\d+\.\d+\s*\z/, shell_output("#{bin}/kernel-watchdog --version"))
    # The watchdog ends the way the program it ran ended (here exit status 3), and says so.
    output = shell_output("#{bin}/kernel-watchdog run -- /bin/sh -c 'exit 3' 2>&1", 3)
    assert_match "exited with status 3", output
  end
end
