"""Integrations with other frameworks, one subpackage each.

A leaf layer: a contrib module may import redflow's public API and its
layers; nothing in redflow imports contrib, so an integration's framework
is imported only by those who use it.
"""
