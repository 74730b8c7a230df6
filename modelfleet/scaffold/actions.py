"""The third-party actions the generated workflows use, each pinned by the full commit SHA of its release tag
(a moved tag cannot change what runs; zizmor's unpinned-uses), with the release in a comment."""

from __future__ import annotations

CHECKOUT = "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683  # v4.2.2"
SETUP_PYTHON = "actions/setup-python@a26af69be951a213d495a4c3e4e4022e16d87065  # v5.6.0"
UPLOAD_ARTIFACT = "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02  # v4.6.2"
DOWNLOAD_ARTIFACT = "actions/download-artifact@d3f86a106a0bac45b974a628896c90dbdf5c8093  # v4.3.0"
PULUMI = "pulumi/actions@8582a9e8cc630786854029b4e09281acd6794b58  # v6.6.1"
AWS_CREDENTIALS = "aws-actions/configure-aws-credentials@e3dd6a429d7300a6a4c196c26e071d42e0343502  # v4.0.2"
PYTHON_VERSION = "3.11"
