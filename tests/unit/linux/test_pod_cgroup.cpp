#include <catch2/catch.hpp>
#include <string>

#include "kwd/platform/linux/pod_cgroup.hpp"

using kwd::platform::linux_proc::parse_pod_cgroup;

namespace {
const std::string kUid = "8c2f6a1e-4b7d-4e8a-9f3c-1d2e3f4a5b6c";
const std::string kUidSystemd = "8c2f6a1e_4b7d_4e8a_9f3c_1d2e3f4a5b6c";
const std::string kId = "3f1c9a0b7e5d4c2a1908f7e6d5c4b3a29180f7e6d5c4b3a2918076e5d4c3b2a1";
}  // namespace

TEST_CASE("pod cgroup: cgroupfs driver, each QoS class") {
  const auto burstable = parse_pod_cgroup("/kubepods/burstable/pod" + kUid + "/" + kId);
  REQUIRE(burstable);
  CHECK(burstable->pod_uid == kUid);
  CHECK(burstable->qos_class == "Burstable");
  CHECK(burstable->driver == "cgroupfs");
  CHECK(burstable->container_id == kId);
  CHECK(burstable->runtime.empty());  // a bare id does not say which runtime
  CHECK(burstable->pod_path == "/kubepods/burstable/pod" + kUid);
  CHECK(burstable->container_path == "/kubepods/burstable/pod" + kUid + "/" + kId);

  const auto guaranteed = parse_pod_cgroup("/kubepods/pod" + kUid + "/" + kId);
  REQUIRE(guaranteed);
  CHECK(guaranteed->qos_class == "Guaranteed");
  CHECK(guaranteed->pod_path == "/kubepods/pod" + kUid);

  const auto besteffort = parse_pod_cgroup("/kubepods/besteffort/pod" + kUid + "/crio-" + kId);
  REQUIRE(besteffort);
  CHECK(besteffort->qos_class == "BestEffort");
  CHECK(besteffort->runtime == "cri-o");
  CHECK(besteffort->container_id == kId);
}

TEST_CASE("pod cgroup: systemd driver, underscores back to dashes, runtime from the scope") {
  const std::string pod =
      "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kUidSystemd + ".slice";
  const auto containerd = parse_pod_cgroup(pod + "/cri-containerd-" + kId + ".scope");
  REQUIRE(containerd);
  CHECK(containerd->pod_uid == kUid);
  CHECK(containerd->qos_class == "Burstable");
  CHECK(containerd->driver == "systemd");
  CHECK(containerd->runtime == "containerd");
  CHECK(containerd->container_id == kId);
  CHECK(containerd->pod_path == pod);
  CHECK_FALSE(containerd->monitor);

  const auto guaranteed = parse_pod_cgroup("/kubepods.slice/kubepods-pod" + kUidSystemd +
                                           ".slice/docker-" + kId + ".scope");
  REQUIRE(guaranteed);
  CHECK(guaranteed->qos_class == "Guaranteed");
  CHECK(guaranteed->runtime == "docker");

  const auto besteffort =
      parse_pod_cgroup("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" +
                       kUidSystemd + ".slice/crio-" + kId + ".scope");
  REQUIRE(besteffort);
  CHECK(besteffort->qos_class == "BestEffort");
  CHECK(besteffort->runtime == "cri-o");

  const auto conmon = parse_pod_cgroup(pod + "/crio-conmon-" + kId + ".scope");
  REQUIRE(conmon);
  CHECK(conmon->monitor);
}

TEST_CASE("pod cgroup: below a cgroup root, from another cgroup namespace, nested deeper") {
  // kubelet's --cgroup-root, and a v1 hierarchy as /proc/PID/cgroup gives it.
  const auto rooted = parse_pod_cgroup("/machine/kubepods/burstable/pod" + kUid + "/" + kId);
  REQUIRE(rooted);
  CHECK(rooted->pod_path == "/machine/kubepods/burstable/pod" + kUid);
  // A reader in its own cgroup namespace (a pod itself) sees the others' paths from above.
  const auto above = parse_pod_cgroup("/../../kubepods-burstable.slice");
  CHECK_FALSE(above);  // no pod named
  const auto relative =
      parse_pod_cgroup("/../../kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                       kUidSystemd + ".slice/cri-containerd-" + kId + ".scope");
  REQUIRE(relative);
  CHECK(relative->container_id == kId);
  // A process in a cgroup the container made below its own.
  const auto nested = parse_pod_cgroup("/kubepods/pod" + kUid + "/" + kId + "/init.scope");
  REQUIRE(nested);
  CHECK(nested->container_path == "/kubepods/pod" + kUid + "/" + kId);
  // Static pods' UIDs are a hash: 32 hex digits.
  const auto static_pod =
      parse_pod_cgroup("/kubepods/burstable/pod0123456789abcdef0123456789abcdef/" + kId);
  REQUIRE(static_pod);
  CHECK(static_pod->pod_uid == "0123456789abcdef0123456789abcdef");
  // The pod alone (its sandbox's cgroup), no container.
  const auto pod_only = parse_pod_cgroup("/kubepods/burstable/pod" + kUid);
  REQUIRE(pod_only);
  CHECK(pod_only->container_id.empty());
  CHECK(pod_only->container_path.empty());
}

TEST_CASE("pod cgroup: what is not kubelet's naming is refused") {
  CHECK_FALSE(parse_pod_cgroup("/"));
  CHECK_FALSE(parse_pod_cgroup("/user.slice/user-1000.slice/session-3.scope"));
  CHECK_FALSE(parse_pod_cgroup("/kubepods"));
  CHECK_FALSE(parse_pod_cgroup("/kubepods/burstable"));
  CHECK_FALSE(parse_pod_cgroup("/kubepods/burstable/podnot-a-uid/" + kId));
  CHECK_FALSE(parse_pod_cgroup("/kubepods/burstable/pod" + kUid + "/short"));
  // A dash where the systemd driver writes an underscore.
  CHECK_FALSE(parse_pod_cgroup("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                               kUid + ".slice/cri-containerd-" + kId + ".scope"));
  // A scope without its suffix under the systemd driver, a QoS slice of another class.
  CHECK_FALSE(parse_pod_cgroup("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                               kUidSystemd + ".slice/cri-containerd-" + kId));
  CHECK_FALSE(parse_pod_cgroup("/kubepods.slice/kubepods-burstable.slice/kubepods-besteffort-pod" +
                               kUidSystemd + ".slice"));
  // Upper-case hex is not what kubelet or the runtimes write.
  std::string upper = kId;
  upper[0] = 'F';
  CHECK_FALSE(parse_pod_cgroup("/kubepods/pod" + kUid + "/" + upper));
}
