# The hybrid-operator image: `hybrid-operator run` with this repository's watches.yaml, roles,
# playbooks and charts in /opt/hybrid-operator. Build with `make docker-build`; deploy with
# `make deploy` (config/manager/manager.yaml runs it as uid 1001 with a read-only root filesystem).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Every Python dependency at the version pinned in requirements.lock (the one list of pins); the
# kubernetes.core collection comes with the `ansible` package.
COPY requirements.lock /tmp/build/requirements.lock
RUN pip install --requirement /tmp/build/requirements.lock

# helm (v4) for the Helm kinds; kubectl is not needed in the image.
COPY scripts/install_tools.py /tmp/build/scripts/install_tools.py
RUN python /tmp/build/scripts/install_tools.py --bin-dir /usr/local/bin --only helm \
        --cache-dir /tmp/build/tools --force-own

# The operator itself, with its operator_sdk.util collection (package data); dependencies are above.
COPY pyproject.toml README.md /tmp/build/
COPY operator/ /tmp/build/operator/
RUN pip install --no-deps /tmp/build && rm -rf /tmp/build

# What the operator runs. Owned by root and read-only for the operator; HOME itself is writable so
# that Ansible and helm can keep their caches there when the root filesystem is writable.
RUN groupadd --gid 1001 hybrid-operator \
    && useradd --uid 1001 --gid 1001 --home-dir /opt/hybrid-operator --no-create-home \
        --shell /usr/sbin/nologin hybrid-operator \
    && install -d -o 1001 -g 1001 /opt/hybrid-operator
COPY watches.yaml /opt/hybrid-operator/watches.yaml
COPY playbooks/ /opt/hybrid-operator/playbooks/
COPY roles/ /opt/hybrid-operator/roles/
COPY charts/ /opt/hybrid-operator/charts/

ENV HOME=/opt/hybrid-operator
WORKDIR /opt/hybrid-operator
USER 1001:1001
ENTRYPOINT ["hybrid-operator", "run", "--watches-file=/opt/hybrid-operator/watches.yaml"]
