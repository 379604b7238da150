"""A sample's bytes: the pytree of leaves, the serializers of each leaf, and one item's encoding.

- ``_pytree``: samples flattened into leaves and back; ``_encode``: a sample into one item's bytes and back.
- ``_serializers``: the serializer interface and the plain ones; ``_registry``: the built-in set in
  upstream's matching order; ``_json_leaf``: the ``json`` leaf; ``_trust``: refusing pickled leaves.
"""
