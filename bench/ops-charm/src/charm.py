#!/usr/bin/env python3
"""The benchmark's peer charm: on update-status and config-changed it does
what etcd-charm does on a healthy unit with nothing to change: is-leader,
config, peer units, a health check of its etcd member, status-set."""

import os
import subprocess

import ops


class EtcdOpsBench(ops.CharmBase):
    def __init__(self, framework: ops.Framework):
        super().__init__(framework)
        for event in (self.on.install, self.on.start, self.on.config_changed,
                      self.on.update_status, self.on.leader_elected,
                      self.on.cluster_relation_changed,
                      self.on.cluster_relation_departed):
            framework.observe(event, self._observe)

    def _observe(self, _event: ops.EventBase):
        leader = self.unit.is_leader()
        endpoints = [e.strip() for e in str(self.config["endpoints"]).split(",") if e.strip()]
        relation = self.model.get_relation("cluster")
        peers = len(relation.units) + 1 if relation else 1
        if not endpoints:
            self.unit.status = ops.BlockedStatus("set the endpoints option")
            return
        number = int(self.unit.name.rsplit("/", 1)[1])
        mine = endpoints[number % len(endpoints)]
        env = dict(os.environ, ETCDCTL_API="3")
        check = subprocess.run(
            ["etcdctl", "--endpoints", mine, "--dial-timeout=3s",
             "--command-timeout=5s", "endpoint", "health"],
            capture_output=True, text=True, env=env, check=False)
        if check.returncode != 0:
            self.unit.status = ops.WaitingStatus(f"etcd at {mine} is not healthy")
            return
        role = "leader" if leader else "follower"
        self.unit.status = ops.ActiveStatus(f"Healthy with {peers} known peers ({role})")


if __name__ == "__main__":
    ops.main(EtcdOpsBench)
