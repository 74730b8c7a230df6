"""Node groups and their sizes, the scheduling-fit check, node disks, pod resources and rollout room."""
