"""Turn plans and results into text, JSON or Markdown. Nothing here touches a target."""
