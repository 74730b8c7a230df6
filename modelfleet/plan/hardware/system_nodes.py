"""A created cluster's system node group, as both its deploy (deploy/node_groups.py) and its cost (cost.py)
read it, so what ``pulumi up`` creates and what the preview prices cannot drift apart.

Untainted and on-demand, for CoreDNS and the controllers (cluster autoscaler, Prometheus, its adapter, LWS):
two nodes in two zones, room for a third and fourth while Prometheus grows with the fleet. The instance type
is the stack's ``cluster.systemInstanceType`` (environment.py); its price is in the table's
``system_instances`` section.
"""

from __future__ import annotations

SYSTEM_GROUP = "system"
SYSTEM_SIZES = (2, 2, 4)  # min, desired, max nodes
SYSTEM_DISK_GIB = 50  # root volume, gp3 at its baseline IOPS and throughput (nothing provisioned above them)
SYSTEM_DISK_IOPS = 3000
SYSTEM_DISK_MIBPS = 125
