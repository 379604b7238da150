"""A sample's bytes: the pytree of leaves, the serializers of each leaf, one item's encoding."""
