"""rocm-bake's arch rules as a Pulumi policy pack: ``pulumi preview|up --policy-pack policy``."""

from arch_policies import PACK_NAME, POLICIES
from pulumi_policy import EnforcementLevel, PolicyPack

PolicyPack(name=PACK_NAME, policies=POLICIES, enforcement_level=EnforcementLevel.MANDATORY)
