"""The built-in Kubernetes kinds, by API group: what ``generate rbac`` resolves a module's ``kind`` with.

``kubernetes.core.k8s`` accepts a kind (``ConfigMap``), its resource name (``configmaps``) or its
singular name (``configmap``). For the built-in groups the resource name is known, and a name
that is none of these is almost certainly a typo (``configmapps``): :func:`lookup` says so, so the
generator can warn instead of granting RBAC for a resource that does not exist. Kinds of other
groups (custom resources) are not known here.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

#: group -> {Kind: resource name}; the kinds of Kubernetes 1.32's built-in API groups
BUILTIN: dict[str, dict[str, str]] = {
    "": {"Binding": "bindings", "ComponentStatus": "componentstatuses", "ConfigMap": "configmaps",
         "Endpoints": "endpoints", "Event": "events", "LimitRange": "limitranges", "Namespace": "namespaces",
         "Node": "nodes", "PersistentVolume": "persistentvolumes",
         "PersistentVolumeClaim": "persistentvolumeclaims", "Pod": "pods", "PodTemplate": "podtemplates",
         "ReplicationController": "replicationcontrollers", "ResourceQuota": "resourcequotas",
         "Secret": "secrets", "Service": "services", "ServiceAccount": "serviceaccounts"},
    "apps": {"ControllerRevision": "controllerrevisions", "DaemonSet": "daemonsets", "Deployment": "deployments",
             "ReplicaSet": "replicasets", "StatefulSet": "statefulsets"},
    "batch": {"CronJob": "cronjobs", "Job": "jobs"},
    "autoscaling": {"HorizontalPodAutoscaler": "horizontalpodautoscalers"},
    "policy": {"PodDisruptionBudget": "poddisruptionbudgets", "Eviction": "evictions"},
    "networking.k8s.io": {"Ingress": "ingresses", "IngressClass": "ingressclasses",
                          "NetworkPolicy": "networkpolicies", "IPAddress": "ipaddresses",
                          "ServiceCIDR": "servicecidrs"},
    "rbac.authorization.k8s.io": {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
                                  "Role": "roles", "RoleBinding": "rolebindings"},
    "storage.k8s.io": {"CSIDriver": "csidrivers", "CSINode": "csinodes", "CSIStorageCapacity": "csistoragecapacities",
                       "StorageClass": "storageclasses", "VolumeAttachment": "volumeattachments"},
    "coordination.k8s.io": {"Lease": "leases"},
    "discovery.k8s.io": {"EndpointSlice": "endpointslices"},
    "events.k8s.io": {"Event": "events"},
    "scheduling.k8s.io": {"PriorityClass": "priorityclasses"},
    "node.k8s.io": {"RuntimeClass": "runtimeclasses"},
    "certificates.k8s.io": {"CertificateSigningRequest": "certificatesigningrequests",
                            "ClusterTrustBundle": "clustertrustbundles"},
    "apiextensions.k8s.io": {"CustomResourceDefinition": "customresourcedefinitions"},
    "apiregistration.k8s.io": {"APIService": "apiservices"},
    "admissionregistration.k8s.io": {
        "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
        "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
        "ValidatingAdmissionPolicy": "validatingadmissionpolicies",
        "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"},
    "authentication.k8s.io": {"TokenReview": "tokenreviews", "SelfSubjectReview": "selfsubjectreviews"},
    "authorization.k8s.io": {"SubjectAccessReview": "subjectaccessreviews",
                             "LocalSubjectAccessReview": "localsubjectaccessreviews",
                             "SelfSubjectAccessReview": "selfsubjectaccessreviews",
                             "SelfSubjectRulesReview": "selfsubjectrulesreviews"},
    "flowcontrol.apiserver.k8s.io": {"FlowSchema": "flowschemas",
                                     "PriorityLevelConfiguration": "prioritylevelconfigurations"},
}


@dataclass(frozen=True)
class Lookup:
    """What a module's ``kind`` names in a group: ``plural`` when known, else maybe a ``suggestion``."""

    plural: str | None
    builtin_group: bool
    suggestion: str | None = None


def lookup(group: str, name: str) -> Lookup:
    """Resolve ``name`` -- a kind, a resource name or a singular name, as ``kubernetes.core`` accepts -- in
    ``group``; for a built-in group, an unknown name gets the closest known kind as a suggestion."""
    kinds = BUILTIN.get(group)
    if kinds is None:
        return Lookup(None, False)
    for kind, plural in kinds.items():
        if name in (kind, plural, kind.lower()):
            return Lookup(plural, True)
    candidates = {**{kind.lower(): kind for kind in kinds}, **{plural: kind for kind, plural in kinds.items()}}
    close = difflib.get_close_matches(name.lower(), list(candidates), n=1, cutoff=0.75)
    return Lookup(None, True, candidates[close[0]] if close else None)
