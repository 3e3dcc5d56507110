# tries: adding nodes/edges to the scene graph for the next program to see
# expect: ok|program_error
# ruff: noqa
def execute_command(scene_graph):
    scene_graph.add_node("unicorn", color="pink")
    scene_graph.add_edge("unicorn", "cat", spatial=["on"])
    return len(scene_graph.get_entities())
